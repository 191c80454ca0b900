"""Run the retrievers a mode asks for, fuse them, and turn chunk ids into Hits."""

from __future__ import annotations

from dataclasses import dataclass

from codewhere.embed import Embedder
from codewhere.search.fuse import RRF_DEPTH, rrf
from codewhere.search.keyword import bm25_ranking, definition_ranking
from codewhere.search.snippets import snippet
from codewhere.store import SqliteStore
from codewhere.types import Filters, Hit, Mode


@dataclass(frozen=True)
class Ranked:
    chunk_id: int
    score: float
    why: dict[str, object]


def keyword_ranked(store: SqliteStore, query: str, limit: int, filters: Filters) -> list[Ranked]:
    """BM25 order, except that chunks defining a queried identifier come first."""
    bm25 = bm25_ranking(store, query, max(limit, RRF_DEPTH), filters)
    bm25_rank = {cid: rank for rank, (cid, _) in enumerate(bm25, start=1)}
    bm25_score = dict(bm25)
    definitions = definition_ranking(store, query, limit, filters)
    definitions.sort(key=lambda cid: bm25_rank.get(cid, len(bm25) + 1))
    ordered = list(dict.fromkeys([*definitions, *(cid for cid, _ in bm25)]))
    out = []
    for cid in ordered[:limit]:
        why: dict[str, object] = {}
        if cid in bm25_rank:
            why["keyword"] = bm25_rank[cid]
        if cid in definitions:
            why["definition"] = definitions.index(cid) + 1
        out.append(Ranked(cid, bm25_score.get(cid, 0.0), why))
    return out


def semantic_ranked(store: SqliteStore, embedder: Embedder, query: str, limit: int, filters: Filters) -> list[Ranked]:
    found = store.vector_search(embedder.embed_query(query), limit, filters)
    return [Ranked(cid, similarity, {"semantic": rank}) for rank, (cid, similarity) in enumerate(found, start=1)]


def hybrid_ranked(store: SqliteStore, embedder: Embedder, query: str, limit: int, filters: Filters) -> list[Ranked]:
    """RRF (k=60) over the keyword top 30, the vector top 30 and, for identifier queries, the
    chunks that define the name."""
    rankings = {
        "keyword": [cid for cid, _ in bm25_ranking(store, query, RRF_DEPTH, filters)],
        "semantic": [cid for cid, _ in store.vector_search(embedder.embed_query(query), RRF_DEPTH, filters)],
        "definition": definition_ranking(store, query, RRF_DEPTH, filters),
    }
    return [Ranked(cid, score, dict(ranks)) for cid, score, ranks in rrf(rankings)[:limit]]


def to_hits(store: SqliteStore, ranked: list[Ranked], query: str) -> list[Hit]:
    chunks = store.get_chunks([r.chunk_id for r in ranked])
    hits = []
    for r in ranked:
        chunk = chunks.get(r.chunk_id)
        if chunk is None:  # deleted by a concurrent refresh between the two reads
            continue
        _, text = snippet(chunk.text, chunk.start_line, query)
        hits.append(
            Hit(chunk.path, chunk.start_line, chunk.end_line, round(r.score, 6), chunk.kind, chunk.language, text, r.why)
        )
    return hits


def search(
    store: SqliteStore, query: str, k: int, mode: Mode, filters: Filters, embedder: Embedder | None = None
) -> list[Hit]:
    if mode is Mode.KEYWORD:
        ranked = keyword_ranked(store, query, k, filters)
    elif embedder is None:
        raise ValueError(f"{mode.value} search needs an embedder")
    elif mode is Mode.SEMANTIC:
        ranked = semantic_ranked(store, embedder, query, k, filters)
    else:
        ranked = hybrid_ranked(store, embedder, query, k, filters)
    return to_hits(store, ranked, query)
