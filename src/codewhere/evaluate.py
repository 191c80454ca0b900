"""Measure retrieval on query files: the study's format and semble's annotations, scored the way
semble scores (binary relevance, NDCG@10, a target hit by the first result whose path
suffix-matches and whose lines overlap)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from codewhere.errors import QueryError
from codewhere.types import Hit

NDCG_K = 10


@dataclass(frozen=True)
class Target:
    path: str
    start_line: int | None = None
    end_line: int | None = None

    @property
    def has_span(self) -> bool:
        return self.start_line is not None and self.end_line is not None


@dataclass(frozen=True)
class EvalQuery:
    query: str
    relevant: tuple[Target, ...]
    secondary: tuple[Target, ...] = ()
    category: str = ""
    label: str = ""  # a short name for tables: the gold symbol, else the query
    grep_phrase: str | None = None
    grep_word: str | None = None
    published: dict[str, int | None] = field(default_factory=dict)

    @property
    def targets(self) -> tuple[Target, ...]:
        return self.relevant + self.secondary


@dataclass(frozen=True)
class QueryFile:
    name: str
    queries: tuple[EvalQuery, ...]
    published_columns: tuple[str, ...] = ()


# ---- reading query files ------------------------------------------------------------------


def _target(raw: object) -> Target:
    if isinstance(raw, str):
        return Target(raw)
    if isinstance(raw, dict) and "path" in raw:
        start, end = raw.get("start_line"), raw.get("end_line")
        return Target(str(raw["path"]), int(start) if start is not None else None, int(end) if end is not None else None)
    raise ValueError(f"a target must be a path or {{path, start_line, end_line}}, got {raw!r}")


def infer_category(query: str) -> str:
    """semble's rule for annotations without a category."""
    if " " not in query.strip():
        return "symbol"
    lowered = query.lower()
    return "architecture" if lowered.startswith("how ") else "semantic"


def load_query_file(path: Path) -> QueryFile:
    """Read the study's format ({"queries": [{q, path, line, ...}]}) or semble's (a list of
    {query, relevant, secondary, category})."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise QueryError(f"cannot read the query file {path}", "check the path") from exc
    except json.JSONDecodeError as exc:
        raise QueryError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})", "fix the file; README shows the format") from exc
    try:
        if isinstance(raw, dict) and "queries" in raw:
            return _study_format(path, raw)
        if isinstance(raw, list):
            return _semble_format(path, raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise QueryError(f"{path} has a malformed query ({exc})", "docs/guide.md's 'Query files' section shows both formats") from exc
    raise QueryError(f"{path} is neither a study query file nor a semble annotation file", "docs/guide.md's 'Query files' section shows both formats")


def _study_format(path: Path, raw: dict) -> QueryFile:
    published = raw.get("published_ranks", {})
    columns = tuple(published.get("columns", ()))
    rows = published.get("rows", {})
    queries = []
    for item in raw["queries"]:
        label = item.get("symbol") or item["q"]
        line = int(item["line"])
        queries.append(EvalQuery(
            query=item["q"],
            relevant=(Target(item["path"], line, line),),
            category=item.get("category") or infer_category(item["q"]),
            label=label,
            grep_phrase=item.get("grep_phrase"),
            grep_word=item.get("grep_word"),
            published=dict(zip(columns, rows.get(label, ()), strict=False)),
        ))
    return QueryFile(path.stem, tuple(queries), columns)


def _semble_format(path: Path, raw: list) -> QueryFile:
    queries = []
    for item in raw:
        queries.append(EvalQuery(
            query=item["query"],
            relevant=tuple(_target(t) for t in item.get("relevant", [])),
            secondary=tuple(_target(t) for t in item.get("secondary", [])),
            category=item.get("category") or infer_category(item["query"]),
            label=item["query"],
        ))
    return QueryFile(path.stem, tuple(queries))


# ---- scoring ------------------------------------------------------------------------------


def path_matches(result_path: str, target_path: str) -> bool:
    """Equal, or either one a `/`-suffix of the other (relative vs rooted paths)."""
    a, b = result_path.replace("\\", "/"), target_path.replace("\\", "/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def covers(path: str, start: int, end: int, target: Target) -> bool:
    if not path_matches(path, target.path):
        return False
    return not target.has_span or not (end < target.start_line or start > target.end_line)  # type: ignore[operator]


class IndexedSpans:
    """The (path, start, end) of every chunk, grouped by path: which targets the index can hit."""

    def __init__(self, spans: Iterable[tuple[str, int, int]]) -> None:
        self._by_path: dict[str, list[tuple[int, int]]] = {}
        for path, start, end in spans:
            self._by_path.setdefault(path, []).append((start, end))

    def __len__(self) -> int:
        return sum(len(ranges) for ranges in self._by_path.values())

    def holds(self, target: Target) -> bool:
        return any(
            covers(path, start, end, target)
            for path, ranges in self._by_path.items() if path_matches(path, target.path)
            for start, end in ranges
        )

    def count(self, query: EvalQuery) -> int:
        """How many of the query's targets exist in the index (semble's NDCG ideal)."""
        return sum(1 for t in query.targets if self.holds(t))


def target_rank(hits: Sequence[Hit], target: Target) -> int | None:
    for rank, hit in enumerate(hits, start=1):
        if covers(hit.path, hit.start_line, hit.end_line, target):
            return rank
    return None


def dcg(relevances: Sequence[int]) -> float:
    return sum(rel / math.log2(i + 2) for i, rel in enumerate(relevances))


def ndcg_at_k(ranks: Sequence[int], n_relevant: int, k: int = NDCG_K) -> float:
    """Binary NDCG@k: a result is relevant if it is the first hit of some target; the ideal list
    holds min(k, n_relevant) relevant results."""
    if n_relevant <= 0:
        return 0.0
    relevances = [0] * k
    for rank in ranks:
        if 1 <= rank <= k:
            relevances[rank - 1] = 1
    return dcg(relevances) / dcg([1] * min(k, n_relevant))


@dataclass(frozen=True)
class QueryScore:
    first_rank: int | None  # rank of the first relevant hit, within the depth searched
    ndcg10: float
    seconds: float


def score_query(hits: Sequence[Hit], query: EvalQuery, indexed_targets: int | None = None) -> tuple[int | None, float]:
    """(first relevant rank, NDCG@10). `indexed_targets` counts the targets that exist in the
    index (semble's ideal); None means all of them do."""
    ranks = [r for t in query.targets if (r := target_rank(hits, t)) is not None]
    n_relevant = len(query.targets) if indexed_targets is None else indexed_targets
    return (min(ranks) if ranks else None), ndcg_at_k(ranks, n_relevant)


@dataclass
class MethodSummary:
    top5: int
    top10: int
    mrr: float
    ndcg10: float
    p50_ms: float


def summarise(scores: Sequence[QueryScore]) -> MethodSummary:
    n = len(scores) or 1
    ranks = [s.first_rank for s in scores]
    latencies = sorted(s.seconds for s in scores)
    return MethodSummary(
        top5=sum(1 for r in ranks if r is not None and r <= 5),
        top10=sum(1 for r in ranks if r is not None and r <= 10),
        mrr=sum(1.0 / r for r in ranks if r) / n,
        ndcg10=sum(s.ndcg10 for s in scores) / n,
        p50_ms=(latencies[len(latencies) // 2] * 1000) if latencies else 0.0,
    )


# ---- running ------------------------------------------------------------------------------

SearchFn = Callable[[str], list[Hit]]


@dataclass
class EvalResult:
    query_file: QueryFile
    methods: tuple[str, ...]
    scores: dict[str, list[QueryScore]]  # method → one score per query
    grep_counts: list[tuple[int | None, int | None]]  # per query: (phrase lines, word lines)
    indexed_targets: list[int]
    scope: tuple[str, ...] = ()

    def summary(self) -> dict[str, MethodSummary]:
        return {m: summarise(self.scores[m]) for m in self.methods}


def run_eval(
    query_file: QueryFile,
    methods: dict[str, SearchFn],
    is_indexed: Callable[[Target], bool],
    grep_count: Callable[[str], int],
) -> EvalResult:
    scores: dict[str, list[QueryScore]] = {m: [] for m in methods}
    indexed = [sum(1 for t in q.targets if is_indexed(t)) for q in query_file.queries]
    for query, n_indexed in zip(query_file.queries, indexed, strict=True):
        for name, search in methods.items():
            started = time.perf_counter()
            hits = search(query.query)
            elapsed = time.perf_counter() - started
            rank, ndcg = score_query(hits, query, n_indexed)
            scores[name].append(QueryScore(rank, ndcg, elapsed))
    greps = [
        (grep_count(q.grep_phrase) if q.grep_phrase else None, grep_count(q.grep_word) if q.grep_word else None)
        for q in query_file.queries
    ]
    return EvalResult(query_file, tuple(methods), scores, greps, indexed)


# ---- machine-readable output --------------------------------------------------------------


def result_data(result: EvalResult) -> dict[str, object]:
    """An eval run as `codewhere eval --json` prints it."""
    rows = []
    for i, q in enumerate(result.query_file.queries):
        rows.append({
            "query": q.query, "label": q.label, "category": q.category,
            "grep_phrase_lines": result.grep_counts[i][0], "grep_word_lines": result.grep_counts[i][1],
            "indexed_targets": result.indexed_targets[i],
            "ranks": {m: result.scores[m][i].first_rank for m in result.methods},
            "ndcg10": {m: round(result.scores[m][i].ndcg10, 4) for m in result.methods},
            "published": q.published,
        })
    summary = {
        m: {"top5": s.top5, "top10": s.top10, "mrr": round(s.mrr, 4), "ndcg10": round(s.ndcg10, 4), "p50_ms": round(s.p50_ms, 3)}
        for m, s in result.summary().items()
    }
    return {"query_file": result.query_file.name, "scope": list(result.scope), "queries": rows, "summary": summary}


def result_csv(result: EvalResult) -> str:
    header = ["label", "query", "category", "grep_phrase_lines", "grep_word_lines", *(f"rank_{m}" for m in result.methods), *(f"ndcg10_{m}" for m in result.methods)]
    lines = [",".join(header)]

    def cell(value: object) -> str:
        text = "" if value is None else str(value)
        return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n') else text

    for i, q in enumerate(result.query_file.queries):
        values: list[object] = [q.label, q.query, q.category, *result.grep_counts[i]]
        values += [result.scores[m][i].first_rank for m in result.methods]
        values += [round(result.scores[m][i].ndcg10, 4) for m in result.methods]
        lines.append(",".join(cell(v) for v in values))
    return "\n".join(lines) + "\n"
