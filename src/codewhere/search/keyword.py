"""Keyword retrieval: BM25 over identifier-split tokens, plus definitions of a queried name."""

from __future__ import annotations

from codewhere.store import Store
from codewhere.tokens import identifier_name, is_identifier_query, query_terms
from codewhere.types import Filters, TermQuery


def bm25_ranking(store: Store, query: str, limit: int, filters: Filters) -> list[tuple[int, float]]:
    terms = query_terms(query)
    if not terms:
        return []
    return store.keyword_search(TermQuery(tuple(terms)), limit, filters)


def definition_ranking(store: Store, query: str, limit: int, filters: Filters) -> list[int]:
    """Chunks that define the name an identifier-like query asks for; empty for plain language."""
    if not is_identifier_query(query):
        return []
    name = identifier_name(query)
    return list(dict.fromkeys(store.chunks_defining_names([name], filters).get(name, [])))[:limit]
