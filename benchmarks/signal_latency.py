"""What the ranking signals add to a warm query: plain fusion and hybrid, interleaved.

    python benchmarks/signal_latency.py [--repo gin ...] [--split reported] [--rounds 5] [--per-signal]

Each repo of semble's benchmark is indexed once; then, `--rounds` times, every query runs as
fusion (all signals off) and as hybrid (all on), one right after the other, so both see the same
machine noise. Per repo: the median over queries of each query's median time (k = 10, snippets
included, as a user's search); then the median over repos of the hybrid / fusion ratio.
`--per-signal` also runs hybrid without each signal and prints what each signal adds (hybrid
minus hybrid without it, ms; the median over repos at the end). Then the methods run in a
shuffled order for each query and round (seeded): a search right after another mode's finds
its own code and pages colder, and a fixed order would charge that to whichever method comes
after fusion.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from codewhere.evaluate import load_query_file  # noqa: E402
from codewhere.search.ranking import SIGNALS  # noqa: E402
from semble_bench import SHARED, indexed_root, mirror_for  # noqa: E402
from splits import SPLITS  # noqa: E402

METHODS = {"fusion": frozenset(SIGNALS), "hybrid": frozenset()}


def methods(per_signal: bool) -> dict[str, frozenset[str]]:
    """Method name → the signals it switches off; `-NAME` is hybrid without NAME."""
    return {**METHODS, **({f"-{name}": frozenset({name}) for name in SIGNALS} if per_signal else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", action="append", default=[])
    parser.add_argument("--split", choices=sorted(SPLITS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"),
                        metavar="DIR", help="git mirrors of the benchmark repositories, DIR/<owner>+<name>/repo (or CODEWHERE_BENCH_MIRRORS)")
    parser.add_argument("--per-signal", action="store_true", help="also time hybrid without each signal")
    args = parser.parse_args()
    runs = methods(args.per_signal)
    added: dict[str, list[float]] = {name: [] for name in runs if name.startswith("-")}
    names = [*args.repo, *(SPLITS[args.split] if args.split else ())] or ["gin", "chi", "requests", "flask"]
    specs = {s["name"]: s for s in json.loads((SHARED / "repos.json").read_text())}
    settings = Settings(cache_dir=Path(tempfile.mkdtemp(prefix="signal-latency-")), models_dir=Settings.from_env().model_cache)
    ratios = []
    for name in names:
        spec = specs[name]
        root = indexed_root(spec, mirror_for(spec["url"], Path(args.mirrors)))
        index = Index.open(root, settings=settings, warm=True)
        index.refresh()
        queries = [q.query for q in load_query_file(SHARED / "annotations" / f"{name}.json").queries]
        times: dict[str, dict[str, list[float]]] = {m: {q: [] for q in queries} for m in runs}
        for query in queries:  # warm-up: SQLite pages, lru caches
            for disabled in runs.values():
                index.search(query, k=10, disabled_signals=disabled)
        shuffle = random.Random(0).shuffle if args.per_signal else None
        for _ in range(args.rounds):
            for query in queries:
                order = list(runs.items())
                if shuffle:
                    shuffle(order)
                for method, disabled in order:
                    started = time.perf_counter()
                    index.search(query, k=10, disabled_signals=disabled)
                    times[method][query].append(time.perf_counter() - started)
        p50 = {m: statistics.median(statistics.median(t) for t in per_query.values()) * 1000 for m, per_query in times.items()}
        ratios.append(p50["hybrid"] / p50["fusion"])
        print(f"{name:<20} fusion {p50['fusion']:.2f} ms  hybrid {p50['hybrid']:.2f} ms  ratio {ratios[-1]:.2f}", flush=True)
        for method in added:
            added[method].append(p50["hybrid"] - p50[method])
        if added:
            print("  ms added by " + "  ".join(f"{m[1:]} {added[m][-1]:+.3f}" for m in added), flush=True)
        index.close()
    print(f"median ratio over {len(ratios)} repos: {statistics.median(ratios):.2f}")
    if added:
        print("median ms added over repos by " + "  ".join(f"{m[1:]} {statistics.median(v):+.3f}" for m, v in added.items()))


if __name__ == "__main__":
    main()
