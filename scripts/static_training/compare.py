"""Step 4 of training the static model: candidates side by side at both levels and on the study.

    python scripts/static_training/compare.py --mirrors DIR --queries FUNCS.json --split dev \
        NAME=MODEL [NAME=MODEL ...]

MODEL is `default` or a model folder. Each is run through semble_bench.py (file level, NDCG@10)
and function_bench.py (the commit questions, function top 5 and MRR@10) on the split, and
function_bench.py's requests study (`--with-study`, requests at semble's pinned revision), all
hybrid and ranked with the static default's fitted set (the set a new default would inherit),
each model's indexes in a cache of its own under CACHE. Prints one row per candidate.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _run(script: str, *args: str) -> dict[str, object]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, str(BENCHMARKS / script), *args, "--json", out.name], check=True,
                       stdout=subprocess.DEVNULL)
        return dict(json.loads(Path(out.name).read_text()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("candidates", nargs="+", metavar="NAME=MODEL")
    parser.add_argument("--mirrors", required=True)
    parser.add_argument("--queries", required=True, help="function_bench.py's questions (mine_functions.py)")
    parser.add_argument("--split", default="dev", choices=("dev", "reported"))
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "codewhere-train" / "bench")
    args = parser.parse_args()
    print("| candidate | NDCG@10 (file) | function top 5 | function MRR@10 | study top 5 / top 10 / MRR |")
    print("|---|---:|---:|---:|---:|")
    for candidate in args.candidates:
        name, _, model = candidate.partition("=")
        cache = args.cache / name
        common = ["--mirrors", args.mirrors, "--index-cache", str(cache), "--ranking-set", "default"]
        common += ["--model", model] if model != "default" else []
        files = _run("semble_bench.py", "--split", args.split, *common)["codewhere"]
        ndcg = sum(float(r["ndcg10"]) for r in files) / len(files)  # type: ignore[attr-defined,union-attr]
        functions = _run("function_bench.py", "--queries", args.queries, "--split", args.split, *common)
        commits = functions["summary"]["hybrid"]["by_set"]["commits"]  # type: ignore[index]
        study_run = _run("function_bench.py", "--queries", args.queries, "--split", "reported", "--repo", "requests",
                         "--with-study", *common)
        study = study_run["summary"]["hybrid"]["by_set"]["study"]  # type: ignore[index]
        questions = study["questions"]
        print(f"| {name} | {ndcg:.4f} | {commits['top5']:.3f} | {commits['mrr']:.3f} | "
              f"{round(study['top5'] * questions)} / {round(study['top10'] * questions)} / {study['mrr']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
