"""semble's retrieval benchmark (63 repos, 1,251 queries) with codewhere, optionally beside semble.

    python benchmarks/semble_bench.py [--repo flask --repo gin ...] [--peer semble] [--json OUT]

Each repo of ../shared/semble-bench/repos.json is taken at its pinned `revision` from a local
git checkout or bare mirror (`--mirrors DIR` holding `<owner>+<name>/repo`, the layout the
`git clone --mirror` of each repository leaves under one folder; `--checkout NAME=PATH` for one repo), exported into a cache outside
the repository, and `benchmark_root` is indexed. Repos without a checkout here are skipped and
listed. Scoring is semble's: top 10, binary relevance, NDCG@10 with the ideal over the targets that
exist in the index, averaged per repo and then over repos.

With `--peer semble`, semble 0.7.0 (`pip install -r benchmarks/requirements.txt`) indexes and
answers the same checkouts in the same run with the same model (codewhere's default model folder,
handed to semble as its model path), and the table shows the ratio per repo.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index, eval_method, eval_mode  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from codewhere.embed.registry import ensure_default_model  # noqa: E402
from codewhere.evaluate import EvalQuery, IndexedSpans, load_query_file, score_query  # noqa: E402
from codewhere.search.ranking_sets import RankingSet, named_set  # noqa: E402
from codewhere.types import FileKind, Filters, Hit  # noqa: E402
from corpora import from_git  # noqa: E402
from splits import SPLITS  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "semble-bench"
LATENCY_RUNS = 3


@dataclass
class RepoRun:
    repo: str
    language: str
    chunks: int
    index_ms: float
    p50_ms: float
    ndcg: list[float]
    categories: list[str]
    indexed_targets: list[int] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return sum(self.ndcg) / len(self.ndcg) if self.ndcg else 0.0


def mirror_for(url: str, mirrors: Path) -> Path | None:
    owner_name = url.removeprefix("https://github.com/").removesuffix(".git")
    candidate = mirrors / owner_name.replace("/", "+") / "repo"
    return candidate if candidate.exists() else None


def indexed_root(spec: dict[str, str], source: Path | None) -> Path:
    """The folder semble's benchmark indexes for a repository of repos.json: its `benchmark_root`
    at the pinned revision, exported from `source` (a mirror or checkout) into the cache."""
    if source is None:
        raise SystemExit(f"{spec['name']}: no mirror of {spec['url']} (fetch it, or pass --mirrors)")
    checkout = from_git(source, spec["revision"], spec["name"], spec.get("benchmark_root"))
    return checkout / spec["benchmark_root"] if spec.get("benchmark_root") else checkout


def evaluate_engine(
    repo: str, language: str, root: Path, queries: list[EvalQuery],
    build: Callable[[Path], tuple[object, IndexedSpans]],
    search: Callable[[object, str], list[Hit]],
) -> RepoRun:
    started = time.perf_counter()
    engine, spans = build(root)
    index_ms = (time.perf_counter() - started) * 1000
    ndcg, latencies, indexed = [], [], []
    for q in queries:
        runs = []
        for _ in range(LATENCY_RUNS):
            started = time.perf_counter()
            hits = search(engine, q.query)
            runs.append(time.perf_counter() - started)
        latencies.append(statistics.median(runs) * 1000)
        n_indexed = spans.count(q)
        _, score = score_query(hits[:10], q, n_indexed)
        ndcg.append(score)
        indexed.append(n_indexed)
    return RepoRun(repo, language, len(spans), index_ms, statistics.median(latencies), ndcg, [q.category for q in queries], indexed)


def chosen_ranking(index: Index, set_name: str | None, values: dict[str, str]) -> RankingSet | None:
    """`--ranking-set` picks a set by name (default: the one fitted for the index's model);
    `--set` changes some of its values. None: the index's own set, as a user gets it."""
    if set_name is None and not values:
        return None
    base = index.ranking_set if set_name is None else named_set(set_name)
    return RankingSet(base.name + (" with --set" if values else ""), base.params.with_values(values), base.off)


def codewhere_engine(
    cache: Path, models: Path, method: str = "hybrid", values: dict[str, str] | None = None, cold: bool = True,
    model: str | None = None, set_name: str | None = None,
) -> tuple[Callable, Callable]:
    """`method` as in `codewhere eval --modes`: hybrid, fusion, -SIGNAL, +SIGNAL. `cold`: each
    repository indexed from nothing (its index time is measured); otherwise an index left in
    `cache` by an earlier run is refreshed and reused. `model`: as `codewhere index --model`
    (default: the built-in static model)."""
    name, disabled = eval_method(method)
    built: dict[Path, tuple[Index, IndexedSpans]] = {}

    def build(root: Path):
        if root not in built:  # several methods share one index of a repo
            index = Index.open(root, settings=Settings(cache_dir=cache, models_dir=models, model=model), rebuild=cold, warm=True)
            index.refresh(rebuild=cold)
            index.ranking_override = chosen_ranking(index, set_name, values or {})
            built[root] = (index, IndexedSpans(index.store.chunk_spans(Filters())))
        return built[root]

    def search(index, query: str) -> list[Hit]:
        return index.search(query, k=10, mode=eval_mode(name), disabled_signals=disabled)

    return build, search


def semble_engine(model_folder: Path) -> tuple[Callable, Callable]:
    from semble import SembleIndex

    def build(root: Path):
        index = SembleIndex.from_path(root, model_path=str(model_folder))
        return index, IndexedSpans((c.file_path, c.start_line, c.end_line) for c in index.chunks)

    def search(index, query: str) -> list[Hit]:
        return [
            Hit(r.chunk.file_path, r.chunk.start_line, r.chunk.end_line, float(r.score), FileKind.CODE, "", "")
            for r in index.search(query, top_k=10)
        ]

    return build, search


def summarise(runs: list[RepoRun]) -> dict[str, object]:
    by_category: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        per_cat: dict[str, list[float]] = defaultdict(list)
        for cat, score in zip(run.categories, run.ndcg, strict=True):
            per_cat[cat].append(score)
        for cat, scores in per_cat.items():
            by_category[cat].append(sum(scores) / len(scores))
    return {
        "repos": len(runs),
        "ndcg10": round(sum(r.mean for r in runs) / len(runs), 4) if runs else None,
        "by_category": {c: round(sum(v) / len(v), 4) for c, v in sorted(by_category.items())},
        "index_ms_median": round(statistics.median(r.index_ms for r in runs), 1) if runs else None,
        "p50_ms_median": round(statistics.median(r.p50_ms for r in runs), 3) if runs else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", action="append", default=[], help="only these repos (repeatable)")
    parser.add_argument("--split", choices=sorted(SPLITS), help="the repos of this split (benchmarks/splits.py)")
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"),
                        metavar="DIR", help="git mirrors of the benchmark repositories, DIR/<owner>+<name>/repo (or CODEWHERE_BENCH_MIRRORS)")
    parser.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--peer", choices=["semble"], help="also run this peer in the same run")
    parser.add_argument("--methods", default="hybrid",
                        help="comma-separated codewhere columns as in `codewhere eval --modes` (default: hybrid)")
    parser.add_argument("--json", metavar="FILE", help="write per-repo results as JSON")
    parser.add_argument("--model", help="codewhere's embedding model, as `codewhere index --model` (default: the static default)")
    parser.add_argument("--index-cache", type=Path, metavar="DIR",
                        help="keep codewhere's indexes here and reuse them (index times are then not cold)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a ranking parameter of search/params.py (for fitting on a dev split)")
    parser.add_argument("--ranking-set", metavar="NAME",
                        help="rank with this parameter set (search/ranking_sets.py: default, onnx:minilm, neutral) "
                             "instead of the one fitted for the model")
    args = parser.parse_args()
    if args.split:
        args.repo = [*args.repo, *SPLITS[args.split]]
    values = dict(item.split("=", 1) for item in args.set)

    specs = json.loads((SHARED / "repos.json").read_text())
    explicit = dict(item.split("=", 1) for item in args.checkout)
    published = {}
    for line in (SHARED / "results" / "per_repo_ndcg10.csv").read_text().splitlines()[1:]:
        cells = line.split(",")
        published[cells[0]] = float(cells[3]) if cells[3] else None

    work = Path(tempfile.mkdtemp(prefix="semble-bench-"))
    models = Settings.from_env().model_cache
    model_folder = ensure_default_model(models)
    os.environ["SEMBLE_CACHE_LOCATION"] = str(work / "semble-cache")  # cold semble indexes, like ours
    engines = {}
    for method in args.methods.split(","):
        label = "codewhere" if method == "hybrid" else f"codewhere{method}" if method[0] in "+-" else f"codewhere-{method}"
        engines[label] = codewhere_engine(args.index_cache or work / "codewhere-cache", models, method, values,
                                          cold=args.index_cache is None, model=args.model, set_name=args.ranking_set)
    if args.peer == "semble":
        engines["semble"] = semble_engine(model_folder)

    runs: dict[str, list[RepoRun]] = {name: [] for name in engines}
    missing = []
    for spec in specs:
        name = spec["name"]
        if args.repo and name not in args.repo:
            continue
        source = explicit.get(name) or mirror_for(spec["url"], Path(args.mirrors))
        if source is None:
            missing.append(name)
            continue
        try:
            root = indexed_root(spec, source)
        except subprocess.CalledProcessError:
            missing.append(f"{name} (pinned commit not in the mirror)")
            continue
        queries = list(load_query_file(SHARED / "annotations" / f"{name}.json").queries)
        line = [f"{name:<20}"]
        for engine_name, (build, search) in engines.items():
            run = evaluate_engine(name, spec["language"], root, queries, build, search)
            runs[engine_name].append(run)
            line.append(f"{engine_name} {run.mean:.3f} ({run.chunks} chunks, index {run.index_ms:.0f} ms, p50 {run.p50_ms:.2f} ms)")
        if "semble" in engines and "codewhere" in engines:
            ours, peer = runs["codewhere"][-1].mean, runs["semble"][-1].mean
            line.append(f"diff {ours - peer:+.3f}")
        if published.get(name) is not None:
            line.append(f"published semble {published[name]:.3f}")
        print("  ".join(line), file=sys.stderr, flush=True)

    report = {name: summarise(r) for name, r in runs.items()}
    report["missing_repos"] = missing
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {name: [{"repo": r.repo, "language": r.language, "ndcg10": round(r.mean, 4), "chunks": r.chunks,
                     "index_ms": round(r.index_ms, 1), "p50_ms": round(r.p50_ms, 3),
                     "by_category": {c: round(sum(s for cc, s in zip(r.categories, r.ndcg, strict=True) if cc == c) / r.categories.count(c), 4)
                                     for c in sorted(set(r.categories))}}
                    for r in rs] for name, rs in runs.items()}, indent=1))


if __name__ == "__main__":
    main()
