"""The code graph on real repositories: symbols, edges by resolution level, graph query latency.

    python benchmarks/graph_bench.py [--mirrors DIR] [--runs 5]

Corpora: requests v2.32.3 and one repository per language family from semble's benchmark list,
at their pinned commits (git mirrors in --mirrors, `<owner>+<name>/repo`). Index time is text
and graph only (no vectors). Latencies are medians over 20 symbols × --runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from codewhere.errors import QueryError  # noqa: E402
from codewhere.types import Filters  # noqa: E402
from corpora import cold_index, from_git  # noqa: E402
from semble_bench import SHARED, mirror_for  # noqa: E402

REPOS = ["requests", "express", "zod", "gin", "serde", "gson", "fmtlib", "dapper", "rails", "laravel-framework"]


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def bench(name: str, root: Path, runs: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(cache_dir=Path(tmp))
        timings = {}
        for chunker in ("lines", "symbols"):
            samples = []
            for _ in range(runs):
                with cold_index(root, settings, chunker=chunker) as index:
                    started = time.perf_counter()
                    index.refresh(vectors=False)
                    samples.append(time.perf_counter() - started)
            timings[chunker] = median_ms(samples)
        with Index.open(root, settings=settings, chunker="symbols") as index:
            index.refresh(vectors=False)
            stats = index.graph_stats()
            paths = index.store.indexed_paths(Filters())
            symbols = [s for p in paths for s in index.store.outline(p) if s.kind in {"function", "method"}]
            random.Random(0).shuffle(symbols)
            sample = symbols[:20]
            latency: dict[str, list[float]] = {"outline": [], "refs": [], "callers": [], "impact_depth3": []}
            for _ in range(runs):
                for s in sample:
                    spec = f"{s.path}:{s.start_line}"
                    for label, call in (("outline", lambda s=s: index.outline(s.path)), ("refs", lambda spec=spec: index.refs(spec)),
                                        ("callers", lambda spec=spec: index.callers(spec)),
                                        ("impact_depth3", lambda spec=spec: index.impact(spec, 3))):
                        started = time.perf_counter()
                        try:
                            call()
                        except QueryError:
                            continue
                        latency[label].append(time.perf_counter() - started)
    calls = {k: v for k, v in stats["edges"].items() if k.startswith("call:")}
    total_calls = sum(calls.values())
    resolved = sum(v for k, v in calls.items() if k.split(":")[1] in {"same-file", "import", "unique"})
    return {
        "corpus": name,
        "symbols": sum(stats["symbols"].values()),
        "symbols_by_kind": stats["symbols"],
        "edges_by_resolution": stats["edges"],
        "call_edges": total_calls,
        "call_edges_resolved_share": round(resolved / total_calls, 3) if total_calls else None,
        "index_ms_lines_chunker": timings["lines"],
        "index_ms_symbols_chunker": timings["symbols"],
        **{f"{k}_p50_ms": median_ms(v) for k, v in latency.items() if v},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"),
                        metavar="DIR", help="git mirrors of the benchmark repositories, DIR/<owner>+<name>/repo (or CODEWHERE_BENCH_MIRRORS)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    specs = {s["name"]: s for s in json.loads((SHARED / "repos.json").read_text())}
    results = []
    for name in REPOS:
        spec = specs[name]
        mirror = mirror_for(spec["url"], Path(args.mirrors))
        if mirror is None:
            print(f"skipping {name}: no mirror", file=sys.stderr)
            continue
        ref = "v2.32.3" if name == "requests" else spec["revision"]  # the study's tag
        try:
            checkout = from_git(mirror, ref, name)
        except subprocess.CalledProcessError:
            print(f"skipping {name}: {ref} is not in the mirror", file=sys.stderr)
            continue
        result = bench(f"{name} ({spec['language']})", checkout, args.runs)
        print(json.dumps(result), file=sys.stderr, flush=True)
        results.append(result)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
