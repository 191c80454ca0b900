"""Run the retrievers a mode asks for, fuse them, and turn chunk ids into Hits."""

from __future__ import annotations

from collections.abc import Sequence

from codewhere.embed import Embedder
from codewhere.graph import GUESSES
from codewhere.search import ranking
from codewhere.search.fuse import rrf
from codewhere.search.keyword import bm25_ranking, definition_ranking, file_bm25
from codewhere.search.params import DEFAULT_PARAMS, RankingParams
from codewhere.search.query import Query
from codewhere.search.rerank import PairScorer, reorder, rerank_text
from codewhere.search.snippets import snippet
from codewhere.store import SearchReader
from codewhere.types import ChunkRow, FileKind, Filters, Hit, Mode, Ranked


def keyword_ranked(
    store: SearchReader, query: Query, limit: int, filters: Filters, params: RankingParams = DEFAULT_PARAMS
) -> list[Ranked]:
    """BM25 order, except that chunks defining a queried identifier come first."""
    bm25 = bm25_ranking(store, query, max(limit, params.rrf_depth), filters, params)
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
            why["names"] = definitions.index(cid) + 1
        out.append(Ranked(cid, bm25_score.get(cid, 0.0), why))
    return out


def semantic_ranked(store: SearchReader, embedder: Embedder, query: Query, limit: int, filters: Filters) -> list[Ranked]:
    found = store.vector_search(embedder.embed_query(query.text), limit, filters)
    return [Ranked(cid, similarity, {"semantic": rank}) for rank, (cid, similarity) in enumerate(found, start=1)]


def hybrid_ranked(
    store: SearchReader, embedder: Embedder, query: Query, limit: int, filters: Filters,
    disabled: frozenset[str] = frozenset(), params: RankingParams = DEFAULT_PARAMS,
) -> list[Ranked]:
    """RRF (k=60) over the keyword top 30, the vector top 30 and the chunks defining a queried
    name, then the ranking signals (search/ranking/) unless disabled."""
    # the function signal orders a file's chunks by their BM25 scores: read deeper than fusion does
    deeper = params.function_keyword_depth if "function" not in disabled else 0
    keyword = bm25_ranking(store, query, max(params.rrf_depth, deeper), filters, params)
    # ... and, where it weighs them by meaning too, the vector list
    semantic_deeper = params.function_semantic_depth if deeper and params.function_semantic_weight and not query.name_like else 0
    semantic = store.vector_search(embedder.embed_query(query.text), max(params.rrf_depth, semantic_deeper), filters)
    rankings = {
        "keyword": [cid for cid, _ in keyword[:params.rrf_depth]],
        "semantic": [cid for cid, _ in semantic[:params.rrf_depth]],
    }
    if disabled >= set(ranking.SIGNALS):  # plain fusion: the baseline the signals are measured against
        rankings["names"] = definition_ranking(store, query, params.rrf_depth, filters)
        return [Ranked(cid, score, dict(ranks)) for cid, score, ranks in rrf(rankings, params.rrf_k, params.rrf_depth)[:limit]]
    # one lookup for the queried identifier and, with query-shape, every name-like word (`Router`)
    own = query.identifier
    extra = sorted(query.names) if "query-shape" not in disabled else []
    # a name typed with a leading capital is looked up where it is defined spelled so (ranking/definition.py)
    spelled = sorted(query.capitalised) if "query-shape" not in disabled else []
    defined = store.chunks_defining_names(sorted({*extra, *([own] if own else [])}), filters, spelled)
    names = list(dict.fromkeys(defined.get(own, [])))[:params.rrf_depth] if own else []
    rankings["names"] = list(dict.fromkeys([*names, *(cid for name in extra for cid in defined.get(name, []))]))[:params.rrf_depth]
    weights = ranking.fusion_weights(query, params) if "query-shape" not in disabled else None
    fused = rrf(rankings, params.rrf_k, params.rrf_depth, weights=weights)[: max(limit, params.candidates)]
    read = store.chunk_rows([cid for cid, _, _ in fused], filters)
    found = [(read[cid], score, why) for cid, score, why in fused if cid in read]
    chunks = [row for row, _, _ in found]
    steps = [name for name in ranking.SIGNALS if name not in disabled]
    return ranking.rank(
        chunks, [score for _, score, _ in found], [why for _, _, why in found], query, steps, params,
        lambda: _evidence(store, chunks, filters, params), lambda ids: store.chunk_rows(ids, filters), limit,
        dict(keyword), file_bm25(store, query, params.file_words_depth, filters, params) if "file-words" not in disabled else {},
        {cid: rank for rank, (cid, _) in enumerate(semantic, start=1)} if semantic_deeper else {},
    )


def _evidence(
    store: SearchReader, candidates: Sequence[ChunkRow], filters: Filters, params: RankingParams
) -> dict[int, dict[int, float]]:
    """Test and example chunks point at what they call, each call weighed by how surely its
    target was found; doc chunks at the names they mention."""
    evidence: dict[int, dict[int, float]] = {}
    tests = [c.chunk_id for c in candidates if c.kind is not FileKind.DOCS and ranking.is_evidence_source(c)]
    for source, targets in store.call_target_chunks(tests).items():
        weighed: dict[int, float] = {}
        for target, resolution in targets:
            weight = params.evidence_guess_weight if resolution in GUESSES else 1.0
            weighed[target] = max(weighed.get(target, 0.0), weight)
        evidence[source] = weighed
    docs = [c for c in candidates if c.kind is FileKind.DOCS and c.mentions]
    defined = store.chunks_defining_names(sorted({n for c in docs for n in c.mentions}), filters)
    for c in docs:
        named = dict.fromkeys((cid for n in c.mentions for cid in defined.get(n, [])), 1.0)
        if named:
            evidence[c.chunk_id] = named
    return evidence


def _read(store: SearchReader, ranked: list[Ranked]) -> dict[int, ChunkRow]:
    rows = store.chunk_rows([r.chunk_id for r in ranked if r.row is None], Filters())
    rows.update((r.chunk_id, r.row) for r in ranked if r.row is not None)
    return rows


def to_hits(store: SearchReader, ranked: list[Ranked], terms: tuple[str, ...], k: int) -> list[Hit]:
    """The first `k` answers: each chunk reports the definition it belongs to (a long function's
    windows report the function), once; a chunk of no definition reports its own lines."""
    hits: list[Hit] = []
    seen: set[tuple[str, str, int, int]] = set()
    for first in range(0, len(ranked), k):  # rows are read k at a time: the next k only if definitions repeated
        part = ranked[first : first + k]
        rows = _read(store, part)
        for r in part:
            row = rows.get(r.chunk_id)
            if row is None:  # deleted by a concurrent refresh between the two reads
                continue
            unit = row.unit
            start, end, symbol = (unit.start_line, unit.end_line, unit.name) if unit else (row.start_line, row.end_line, "")
            if (row.repo, row.path, start, end) in seen:
                continue
            seen.add((row.repo, row.path, start, end))
            snippet_start, text = snippet(row.text, row.start_line, terms)
            hits.append(Hit(row.path, start, end, round(r.score, 6), row.kind, row.language, text, dict(r.why), row.repo, symbol, snippet_start))
            if len(hits) == k:
                return hits
    return hits


def search(
    store: SearchReader, query: Query, k: int, mode: Mode, filters: Filters, embedder: Embedder | None = None,
    disabled: frozenset[str] = frozenset(), reranker: PairScorer | None = None, rerank_top_n: int = 0,
    params: RankingParams = DEFAULT_PARAMS,
) -> list[Hit]:
    """`reranker` re-scores the best `rerank_top_n` candidates; if it has no scores, the fused order stands."""
    # twice as deep as asked: several chunks of one definition make one hit
    depth = 2 * (max(k, rerank_top_n) if reranker else k)
    if mode is Mode.KEYWORD:
        ranked = keyword_ranked(store, query, depth, filters, params)
    elif embedder is None:
        raise ValueError(f"{mode.value} search needs an embedder")
    elif mode is Mode.SEMANTIC:
        ranked = semantic_ranked(store, embedder, query, depth, filters)
    else:
        ranked = hybrid_ranked(store, embedder, query, depth, filters, disabled, params)
    if reranker is not None and ranked:
        ranked = _reranked(store, reranker, query, ranked, rerank_top_n)
    return to_hits(store, ranked, query.terms, k)


def _reranked(store: SearchReader, reranker: PairScorer, query: Query, ranked: list[Ranked], top_n: int) -> list[Ranked]:
    head = ranked[:top_n]
    chunks = _read(store, head)
    head = [r for r in head if r.chunk_id in chunks]
    scores = reranker.score(query.text, [rerank_text(chunks[r.chunk_id].path, chunks[r.chunk_id].text) for r in head])
    if scores is None:
        return ranked
    by_id = {r.chunk_id: (r, s) for r, s in zip(head, scores, strict=True)}
    order = reorder([r.chunk_id for r in head], scores)
    out = [Ranked(cid, by_id[cid][1], {**by_id[cid][0].why, "rerank": round(by_id[cid][1], 4)}, chunks[cid]) for cid in order]
    return out + ranked[top_n:]
