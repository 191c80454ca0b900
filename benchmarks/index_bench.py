"""Index and query timings on real corpora: cold index, unchanged refresh, query latency.

Usage:
    python benchmarks/index_bench.py --requests-mirror PATH_TO_psf_requests_git [--django] [--runs 5]

Prints files kept/skipped by reason and chunk counts, then medians of `--runs` runs. Process
start-up (`python -m codewhere --version`) is timed separately from in-process work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import from_sdist, requests_corpus  # noqa: E402

from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402

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
    cold, refresh, query = [], [], []
    report = None
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(cache_dir=Path(tmp))
        for run in range(runs):
            with Index.open(root, settings=settings, rebuild=True) as index:
                started = time.perf_counter()
                report = index.refresh()
                cold.append(time.perf_counter() - started)
                started = time.perf_counter()
                again = index.refresh()
                refresh.append(time.perf_counter() - started)
                assert again.bytes_read == 0
                for q in queries:
                    started = time.perf_counter()
                    index.search(q, k=10, mode="keyword")
                    query.append(time.perf_counter() - started)
                stats = index.status()
    assert report is not None
    return {
        "corpus": name,
        "files_kept": report.files_kept,
        "skipped": dict(sorted(report.skipped.items())),
        "chunks": stats.chunks,
        "bytes": stats.bytes,
        "cold_index_ms": median_ms(cold),
        "unchanged_refresh_ms": median_ms(refresh),
        "keyword_query_p50_ms": median_ms(query),
        "runs": runs,
    }


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
    args = parser.parse_args()
    results = [bench_corpus("requests 2.32.3", requests_corpus(args.requests_mirror), KEYWORD_QUERIES, args.runs)]
    if args.django:
        results.append(bench_corpus("Django 5.1.4", from_sdist("Django", "5.1.4"), DJANGO_QUERIES, args.runs))
    print(json.dumps({"process_start_ms": process_start_ms(args.runs), "corpora": results}, indent=2))


if __name__ == "__main__":
    main()
