"""Code-aware ranking: the signals that re-rank fused candidates, one concern per module.

`rank` is the one entry point. Each signal is a small pure function of a chunk's row, the parsed
query and the ranking parameters (a factor), or of the whole candidate list (evidence, folder,
coherence, function); none touches the database: the engine gathers the facts first. A signal is switched
off by leaving its name out of the set `rank` is given. Every number a signal uses is a field of
search/params.py's RankingParams.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from codewhere.search.params import RankingParams
from codewhere.search.query import Query
from codewhere.search.ranking.coherence import cohere, lift_folders
from codewhere.search.ranking.definition import definition_factor
from codewhere.search.ranking.evidence import Evidence, Fetch, transfer_evidence
from codewhere.search.ranking.files import lift_by_file_words
from codewhere.search.ranking.function import place_functions
from codewhere.search.ranking.path import path_factor
from codewhere.search.ranking.penalties import is_evidence_source, kind_factor
from codewhere.search.ranking.scores import Factor, Scores
from codewhere.search.ranking.shape import fusion_weights
from codewhere.search.ranking.signature import signature_factor
from codewhere.search.ranking.size import size_factor
from codewhere.types import ChunkRow, Ranked

__all__ = ["SIGNALS", "fusion_weights", "is_evidence_source", "rank"]

SIGNALS = (
    "query-shape", "definition", "evidence", "kind-prior", "signature", "path", "size", "folder", "coherence", "file-words", "function",
)
# `query-shape` weighs the fusion (see fusion_weights); the rest run here, in this order
FACTORS: dict[str, Factor] = {
    "definition": definition_factor, "kind-prior": kind_factor, "signature": signature_factor, "path": path_factor,
    "size": size_factor,
}
AFTER_EVIDENCE = ("kind-prior", "signature", "path", "size")  # the factors that see evidence's gains


def rank(
    rows: Sequence[ChunkRow],
    scores: Sequence[float],
    whys: Sequence[Mapping[str, object]],
    query: Query,
    signals: Collection[str],
    params: RankingParams,
    evidence: Callable[[], Evidence] | None = None,
    fetch: Fetch | None = None,
    limit: int | None = None,
    keyword: Mapping[int, float] | None = None,
    files: Mapping[tuple[str, str], float] | None = None,
    semantic: Mapping[int, int] | None = None,
) -> list[Ranked]:
    """The `signals` over fused candidates (their rows, fused scores and `why`s): the best `limit`
    (default all), best first, each with its signals' factors in `why`. `evidence` reads the
    links only when that signal runs (not when the query asks for tests or docs); `fetch` reads
    the chunks they point at that are not candidates yet, which join at score 0. `keyword`: BM25
    scores by chunk id, which `function` orders a file's chunks by; `files`: BM25 scores of whole
    files by (repository, path), which `file-words` lifts a file's chunks by; `semantic`: ranks in
    the vector list by chunk id, which `function` weighs a file's chunks by too (where the set says so)."""
    run = Scores(rows, scores, whys, params)
    if "definition" in signals and query.names:  # no name asked for: the factor is 1 for every chunk
        run.multiply(query, [("definition", definition_factor)])
    if "evidence" in signals and evidence is not None and fetch is not None and not (query.wants_tests or query.wants_docs):
        transfer_evidence(run, evidence(), fetch, run.ranked() if "definition" in signals else range(len(run.rows)))
    run.multiply(query, [(name, FACTORS[name]) for name in AFTER_EVIDENCE if name in signals])
    own = list(run.scores) if "function" in signals else []  # each chunk's score before the file-level lifts
    if "folder" in signals:
        lift_folders(run)
    capped: set[int] = set()
    if "coherence" in signals:
        capped = cohere(run, query)
    if "file-words" in signals and files:
        lift_by_file_words(run, files)
    if "function" in signals:
        capped = place_functions(run, query, own, scores, keyword or {}, capped, files or {}, semantic or {})
    order = run.ranked()
    if capped:  # file_repeat_decay 0: a file's extra chunks after every file's kept ones
        order = [i for i in order if i not in capped] + [i for i in order if i in capped]
    return [run.entry(i) for i in order[:limit]]
