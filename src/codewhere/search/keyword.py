"""Keyword retrieval: BM25 over identifier-split tokens (of chunks, and of whole files), plus definitions
of a queried name."""

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
    return store.keyword_search(_term_query(query, params), limit, filters)


def file_bm25(store: SearchReader, query: Query, limit: int, filters: Filters, params: RankingParams) -> dict[tuple[str, str], float]:
    """(repository, path) → BM25 of the best `limit` files, each file one document."""
    if not query.terms:
        return {}
    return store.file_keyword_search(_term_query(query, params), limit, filters)


def _term_query(query: Query, params: RankingParams) -> TermQuery:
    return TermQuery(query.terms, field_weights=(params.keyword_path_weight, params.keyword_text_weight))


def definition_ranking(store: SearchReader, query: Query, limit: int, filters: Filters) -> list[int]:
    """Chunks that define the name an identifier query asks for; empty for plain language."""
    if query.identifier is None:
        return []
    name = query.identifier
    return list(dict.fromkeys(store.chunks_defining_names([name], filters).get(name, [])))[:limit]
