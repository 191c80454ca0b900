"""Function-level retrieval: does a hit point at the function a question is about?

    python benchmarks/mine_functions.py --mirrors DIR --split dev --split reported --out FUNCS.json
    python benchmarks/function_bench.py --mirrors DIR --queries FUNCS.json --split dev [--peer semble] [--json OUT]

Each repository is indexed at its pinned revision (its benchmark root, as semble_bench.py does)
and asked every mined question (a commit subject) with each method; k = 10. A hit *finds the
function* when it is in the gold file and its range holds the function's first line; it is
*inside* it when its range overlaps the function's lines; it *finds the file* when it is in
the gold file. Reported per method: function-level top 1 / 5 / 10 and MRR@10, inside top 5 and
file top 5, over all questions and per language.

`--with-spans` adds semble's queries whose targets carry line spans (the first span is the gold);
`--with-study` adds the requests study's twelve questions, each gold definition found again by
name at semble's pinned revision of requests.

Methods are `codewhere eval --modes` columns (hybrid, fusion, -SIGNAL, keyword: BM25 over the
symbol chunks, one per function or method) and, with `--peer semble`, semble 0.7.0 with the same
model, in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.config import Settings  # noqa: E402
from codewhere.embed.registry import ensure_default_model  # noqa: E402
from codewhere.evaluate import load_query_file  # noqa: E402
from codewhere.languages import language_of  # noqa: E402
from codewhere.parse import parse  # noqa: E402
from codewhere.types import Hit  # noqa: E402
from mine_functions import show_file  # noqa: E402
from semble_bench import SHARED, codewhere_engine, indexed_root, mirror_for, semble_engine  # noqa: E402
from splits import SPLITS  # noqa: E402

DEPTH = 10


@dataclass(frozen=True)
class Outcome:
    language: str
    set: str  # commits (mined), semble-spans or study
    function_rank: int | None  # 1-based rank of the first hit that finds the function
    inside_rank: int | None
    file_rank: int | None
    ms: float


STUDY = Path(__file__).resolve().parents[2] / "shared" / "bench" / "requests-seed.json"


def span_questions(spec: dict[str, str]) -> list[dict]:
    """semble's queries of this repository whose first target carries a line span, its path
    relative to the benchmark root (where hits are)."""
    root = (spec.get("benchmark_root") or "").rstrip("/")
    out = []
    for q in load_query_file(SHARED / "annotations" / f"{spec['name']}.json").queries:
        span = next((t for t in q.targets if t.has_span), None)
        if span is not None:
            path = span.path[len(root) + 1:] if root and span.path.startswith(f"{root}/") else span.path  # as indexed
            out.append({"repo": spec["name"], "language": spec["language"], "query": q.query, "path": path,
                        "line": span.start_line, "end_line": span.end_line, "set": "semble-spans"})
    return out


def study_questions(spec: dict[str, str], mirror: Path) -> list[dict]:
    """The requests study's questions, each definition looked up by name at the pinned revision."""
    root = (spec.get("benchmark_root") or "").rstrip("/")
    out = []
    for q in json.loads(STUDY.read_text())["queries"]:
        text = show_file(mirror, spec["revision"], q["path"])
        parsed = parse(language_of(q["path"]), text) if text is not None else None
        found = [s for s in (parsed.symbols if parsed else []) if s.name == q["symbol"]]
        if len(found) == 1 and q["path"].startswith(f"{root}/"):
            out.append({"repo": spec["name"], "language": spec["language"], "query": q["q"],
                        "path": q["path"][len(root) + 1:], "line": found[0].start_line, "end_line": found[0].end_line,
                        "set": "study"})
    return out


def judge(hits: list[Hit], question: dict, ms: float) -> Outcome:
    path, line, end = question["path"], question["line"], question["end_line"]

    def first(found: Callable[[Hit], bool]) -> int | None:
        return next((rank for rank, h in enumerate(hits[:DEPTH], start=1) if found(h)), None)

    return Outcome(
        question["language"], question.get("set", "commits"),
        first(lambda h: h.path == path and h.start_line <= line <= h.end_line),
        first(lambda h: h.path == path and h.start_line <= end and h.end_line >= line),
        first(lambda h: h.path == path),
        ms,
    )


def summary(outcomes: list[Outcome]) -> dict[str, float]:
    n = len(outcomes) or 1

    def within(ranks: list[int | None], k: int) -> float:
        return round(sum(1 for r in ranks if r is not None and r <= k) / n, 4)

    function = [o.function_rank for o in outcomes]
    return {
        "questions": len(outcomes),
        "top1": within(function, 1), "top5": within(function, 5), "top10": within(function, 10),
        "mrr": round(sum(1 / r for r in function if r) / n, 4),
        "inside_top5": within([o.inside_rank for o in outcomes], 5),
        "file_top5": within([o.file_rank for o in outcomes], 5),
        "p50_ms": round(statistics.median(o.ms for o in outcomes), 3) if outcomes else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"),
                        metavar="DIR", help="git mirrors of the benchmark repositories, DIR/<owner>+<name>/repo (or CODEWHERE_BENCH_MIRRORS)")
    parser.add_argument("--queries", required=True, metavar="FILE", help="mine_functions.py's output")
    parser.add_argument("--split", choices=sorted(SPLITS), help="only the repos of this split")
    parser.add_argument("--repo", action="append", default=[], help="only these repos (repeatable)")
    parser.add_argument("--methods", default="hybrid,fusion,keyword", help="codewhere columns (default: hybrid,fusion,keyword)")
    parser.add_argument("--peer", choices=["semble"], help="also run this peer in the same run")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a ranking parameter")
    parser.add_argument("--ranking-set", metavar="NAME", help="rank with this parameter set (default: the model's; neutral, ...)")
    parser.add_argument("--json", metavar="FILE", help="write the summary and every outcome as JSON")
    parser.add_argument("--index-cache", type=Path, metavar="DIR", help="keep codewhere's indexes here between runs")
    parser.add_argument("--model", help="codewhere's embedding model, as `codewhere index --model` (default: the static default)")
    parser.add_argument("--with-spans", action="store_true", help="add semble's queries with line-span targets")
    parser.add_argument("--with-study", action="store_true", help="add the requests study (on the repository requests)")
    args = parser.parse_args()
    values = dict(item.split("=", 1) for item in args.set)
    questions: dict[str, list[dict]] = defaultdict(list)
    for q in json.loads(Path(args.queries).read_text()):
        questions[q["repo"]].append(q)
    wanted = set(args.repo) | (set(SPLITS[args.split]) if args.split else set())
    all_specs = [s for s in json.loads((SHARED / "repos.json").read_text()) if not wanted or s["name"] in wanted]
    for spec in all_specs:
        if args.with_spans:
            questions[spec["name"]].extend(span_questions(spec))
        mirror = mirror_for(spec["url"], Path(args.mirrors))
        if args.with_study and spec["name"] == "requests" and mirror is not None:
            questions[spec["name"]].extend(study_questions(spec, mirror))
    specs = [s for s in all_specs if questions.get(s["name"])]

    work = Path(tempfile.mkdtemp(prefix="function-bench-"))
    models = Settings.from_env().model_cache
    model_folder = ensure_default_model(models)
    os.environ["SEMBLE_CACHE_LOCATION"] = str(work / "semble-cache")
    cache = args.index_cache or work / "codewhere-cache"
    cold = args.index_cache is None
    engines = {method: codewhere_engine(cache, models, method, values, cold, args.model, args.ranking_set)
               for method in args.methods.split(",") if method}
    if args.peer == "semble":
        engines["semble"] = semble_engine(model_folder)
    outcomes: dict[str, list[Outcome]] = {name: [] for name in engines}
    per_repo: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for spec in specs:
        root = indexed_root(spec, mirror_for(spec["url"], Path(args.mirrors)))
        line = [f"{spec['name']:<20} {len(questions[spec['name']]):>3} q"]
        for name, (build, search) in engines.items():
            engine, _ = build(root)
            found = []
            for q in questions[spec["name"]]:
                started = time.perf_counter()
                hits = search(engine, q["query"])
                found.append(judge(hits, q, (time.perf_counter() - started) * 1000))
            outcomes[name].extend(found)
            per_repo[spec["name"]][name] = summary(found)
            line.append(f"{name} {per_repo[spec['name']][name]['top5']:.2f}/{per_repo[spec['name']][name]['file_top5']:.2f}")
        print("  ".join(line), file=sys.stderr, flush=True)

    report: dict[str, object] = {}
    for name, found in outcomes.items():
        by_language: dict[str, list[Outcome]] = defaultdict(list)
        by_set: dict[str, list[Outcome]] = defaultdict(list)
        for o in found:
            by_language[o.language].append(o)
            by_set[o.set].append(o)
        report[name] = {"all": summary(found), "by_set": {s: summary(os_) for s, os_ in sorted(by_set.items())},
                        "by_language": {lang: summary(os_) for lang, os_ in sorted(by_language.items())}}
    print(json.dumps({name: r["by_set"] for name, r in report.items()}, indent=1))  # type: ignore[index]
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": report, "per_repo": per_repo}, indent=1))


if __name__ == "__main__":
    main()
