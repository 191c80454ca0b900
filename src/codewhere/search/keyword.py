"""Keyword retrieval: BM25 over identifier-split tokens, plus definitions of a queried name."""

from __future__ import annotations

from codewhere.search.params import DEFAULT_PARAMS, RankingParams
from codewhere.search.query import Query
from codewhere.store import SearchReader
from codewhere.types import Filters, TermQuery


def bm25_ranking(
    store: SearchReader, query: Query, limit: int, filters: Filters, params: RankingParams = DEFAULT_PARAMS
) -> list[tuple[int, float]]:
    if not query.terms:
        return []
    weights = (params.keyword_path_weight, params.keyword_text_weight)
    return store.keyword_search(TermQuery(query.terms, field_weights=weights), limit, filters)


def definition_ranking(store: SearchReader, query: Query, limit: int, filters: Filters) -> list[int]:
    """Chunks that define the name an identifier query asks for; empty for plain language."""
    if query.identifier is None:
        return []
    name = query.identifier
    return list(dict.fromkeys(store.chunks_defining_names([name], filters).get(name, [])))[:limit]
