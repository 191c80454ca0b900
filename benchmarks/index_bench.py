"""Index and query timings on real corpora: cold index, unchanged refresh, query latency, RSS.

Usage:
    python benchmarks/index_bench.py --requests-mirror PATH_TO_psf_requests_git [--django] [--runs 5] [--model-build]

Prints files kept/skipped by reason and chunk counts, then medians of `--runs` runs: cold index
with vectors (default model already built), cold index text-only, unchanged refresh, and query
p50 per mode. Process start-up (`python -m codewhere --version`) is timed separately;
`--model-build` also times building the default model from scratch (once).
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

from codewhere.config import Settings  # noqa: E402
from codewhere.embed.registry import ensure_default_model  # noqa: E402
from corpora import cold_index, from_sdist, requests_corpus  # noqa: E402

KEYWORD_QUERIES = [
    "raise_for_status", "UnrewindableBodyError", "should_strip_auth", "get_netrc_auth",
    "redirect loop", "proxy bypass local network", "chunked transfer encoding", "cookie jar",
]
DJANGO_QUERIES = [
    "QuerySet", "get_object_or_404", "csrf token middleware", "database migration autodetector",
    "template context processor", "reverse url resolver", "password hasher", "select_related",
]


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def bench_corpus(name: str, root: Path, queries: list[str], runs: int) -> dict[str, object]:
    cold, cold_text, refresh = [], [], []
    query: dict[str, list[float]] = {m: [] for m in ("keyword", "semantic", "hybrid")}
    report = None
    models = Settings.from_env().model_cache
    ensure_default_model(models)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(cache_dir=Path(tmp), models_dir=models)
        for _ in range(runs):
            with cold_index(root, settings) as index:
                started = time.perf_counter()
                index.refresh(vectors=False)
                cold_text.append(time.perf_counter() - started)
            with cold_index(root, settings) as index:
                started = time.perf_counter()
                report = index.refresh()
                cold.append(time.perf_counter() - started)
                started = time.perf_counter()
                again = index.refresh()
                refresh.append(time.perf_counter() - started)
                assert again.bytes_read == 0
                for mode, samples in query.items():
                    for q in queries:
                        started = time.perf_counter()
                        index.search(q, k=10, mode=mode)
                        samples.append(time.perf_counter() - started)
                stats = index.status()
    assert report is not None
    return {
        "corpus": name,
        "files_kept": report.files_kept,
        "skipped": dict(sorted(report.skipped.items())),
        "chunks": stats.chunks,
        "bytes": stats.bytes,
        "cold_index_with_vectors_ms": median_ms(cold),
        "cold_index_text_only_ms": median_ms(cold_text),
        "unchanged_refresh_ms": median_ms(refresh),
        **{f"{mode}_query_p50_ms": median_ms(samples) for mode, samples in query.items()},
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "runs": runs,
    }


def model_build_seconds() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        ensure_default_model(Path(tmp))
        return round(time.perf_counter() - started, 1)


def process_start_ms(runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "codewhere", "--version"], check=True, capture_output=True)
        samples.append(time.perf_counter() - started)
    return median_ms(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests-mirror", help="a git checkout or bare mirror of psf/requests (else the sdist)")
    parser.add_argument("--django", action="store_true", help="also Django 5.1.4 (sdist, ~2,900 files)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model-build", action="store_true", help="also time a from-scratch default model build")
    args = parser.parse_args()
    build = model_build_seconds() if args.model_build else None
    results = [bench_corpus("requests 2.32.3", requests_corpus(args.requests_mirror), KEYWORD_QUERIES, args.runs)]
    if args.django:
        results.append(bench_corpus("Django 5.1.4", from_sdist("Django", "5.1.4"), DJANGO_QUERIES, args.runs))
    print(json.dumps({"process_start_ms": process_start_ms(args.runs), "model_build_s": build, "corpora": results}, indent=2))


if __name__ == "__main__":
    main()
