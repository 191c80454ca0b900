"""Signal `signature`: query words in a symbol chunk's name and signature count extra."""

from __future__ import annotations

from functools import lru_cache

from codewhere.search.params import RankingParams
from codewhere.search.query import Query
from codewhere.search.ranking.words import head, line_words
from codewhere.types import ChunkRow


@lru_cache(maxsize=16_384)
def signature_words(text: str) -> frozenset[str]:
    """The words of a symbol chunk's first two lines (its name and signature), split and whole.
    Cached by the whole text: a kept chunk's text is the same string query after query, so its
    hash is computed once and no head is cut again."""
    return frozenset().union(*(line_words(line) for line in head(text, 2).split("\n")))


def signature_factor(c: ChunkRow, query: Query, p: RankingParams) -> float:
    if not c.defines or not query.term_set:
        return 1.0
    return 1 + p.signature_weight * len(query.term_set & signature_words(c.text)) / len(query.term_set)
