"""codewhere's speed against semble's over several runs of `semble_bench.py --peer semble --json`.

    for i in 1 2 3; do python benchmarks/semble_bench.py --split reported --mirrors DIR \
        --peer semble --json run$i.json; done
    python benchmarks/speed_ratios.py run1.json run2.json run3.json

This machine's speed drifts between runs, so each ratio is taken within one run (both engines
indexed and queried the same repository one after the other) and the runs' ratios are then
summarised by their median. Prints a Markdown table per repository (median times, median ratios)
and the median and largest ratio over the repositories.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def per_repo(run: dict[str, list[dict[str, object]]], engine: str) -> dict[str, dict[str, object]]:
    return {str(r["repo"]): r for r in run[engine]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="files written by semble_bench.py --peer semble --json")
    args = parser.parse_args()
    runs = [json.loads(path.read_text()) for path in args.runs]
    if any("semble" not in run or "codewhere" not in run for run in runs):
        raise SystemExit("each file needs both engines: run semble_bench.py with --peer semble and the hybrid method")
    ours = [per_repo(run, "codewhere") for run in runs]
    theirs = [per_repo(run, "semble") for run in runs]
    repos = [repo for repo in ours[0] if all(repo in o and repo in t for o, t in zip(ours, theirs, strict=True))]
    print("| repo | index ms (codewhere / semble) | ratio | query p50 ms (codewhere / semble) | ratio |")
    print("|---|---:|---:|---:|---:|")
    index_ratios: dict[str, float] = {}
    query_ratios: dict[str, float] = {}
    for repo in repos:
        cells = []
        for field in ("index_ms", "p50_ms"):
            mine = [float(str(o[repo][field])) for o in ours]
            peer = [float(str(t[repo][field])) for t in theirs]
            ratio = statistics.median(m / p for m, p in zip(mine, peer, strict=True))
            (index_ratios if field == "index_ms" else query_ratios)[repo] = ratio
            digits = 0 if field == "index_ms" else 2
            cells += [f"{statistics.median(mine):.{digits}f} / {statistics.median(peer):.{digits}f}", f"{ratio:.2f}"]
        print(f"| {repo} | " + " | ".join(cells) + " |")
    for label, ratios in (("cold index", index_ratios), ("warm query p50", query_ratios)):
        worst = max(ratios, key=ratios.__getitem__)
        print(f"{label}: median ratio {statistics.median(ratios.values()):.2f} over {len(ratios)} repositories, "
              f"largest {ratios[worst]:.2f} ({worst}); {len(runs)} runs")


if __name__ == "__main__":
    main()
