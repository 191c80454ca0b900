"""The Linux kernel on a laptop: a cold index (time per phase, peak memory of the indexer and its
workers, size on disk by table), then what a user does with it: one-shot CLI searches, warm
hybrid searches, a one-file change made searchable, callers and impact.

The tree is Debian's `linux-source-6.1`, fetched with `apt-get download` and unpacked (or pass
an unpacked tree with `--tree`). It is not a git repository, so its `.gitignore` files do not
apply (ripgrep's rule); the tarball holds sources only.

    python benchmarks/kernel_bench.py --work /tmp/kernel [--tree DIR] [--workers 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import psutil

PACKAGE = "linux-source-6.1"
QUESTIONS = [
    "copy data from user space",
    "ext4_file_write_iter",
    "allocate pages for the page cache",
    "schedule the next task on this cpu",
    "checksum of a tcp packet",
    "kmalloc",
    "parse the kernel command line",
    "free an inode when its last reference is dropped",
    "spin_lock_irqsave",
    "register a character device",
    "handle a page fault",
    "timer interrupt tick",
]
# asked once each after QUESTIONS, to time questions whose rarer words the reader has not held yet
NEW_QUESTIONS = [
    "read the temperature sensor over i2c",
    "map a dma buffer for a device",
    "retransmit a lost tcp segment",
    "mount a filesystem from a block device",
    "usb_submit_urb",
    "wake up processes waiting on a queue",
    "parse a device tree node property",
    "rcu_read_lock",
    "flush the translation lookaside buffer",
    "compress data with zlib",
    "send a signal to a process group",
    "allocate an interrupt vector for msi",
]
GRAPH_SYMBOLS = ["kmalloc", "schedule", "copy_from_user", "ext4_file_write_iter", "vfs_read", "mutex_lock"]


def fetch_tree(work: Path) -> Path:
    """Debian's kernel source package, unpacked under `work` (kept between runs)."""
    tree = work / PACKAGE
    if tree.is_dir():
        return tree
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", PACKAGE], cwd=work, check=True)
    deb = next(work.glob(f"{PACKAGE}_*.deb"))
    unpacked = work / "deb"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
    tarball = next((unpacked / "usr/src").glob(f"{PACKAGE}.tar.*"))
    with tarfile.open(tarball) as archive:
        archive.extractall(work, filter="tar")
    shutil.rmtree(unpacked)
    return tree


def source_bytes(tree: Path) -> int:
    total = 0
    for folder, _, files in os.walk(tree):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


class TreeMemory:
    """Peak resident memory of a process and its children together, sampled."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self.peak_parent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                parent = self.process.memory_info().rss
                children = sum(c.memory_info().rss for c in self.process.children(recursive=True))
            except psutil.Error:
                parent, children = 0, 0
            self.peak_parent = max(self.peak_parent, parent)
            self.peak = max(self.peak, parent + children)
            self._stop.wait(0.25)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def cold_index(tree: Path, db: Path, workers: int | None, env: dict[str, str]) -> dict[str, object]:
    for leftover in db.parent.glob(db.name + "*"):
        leftover.unlink()
    command = [sys.executable, "-m", "codewhere", "index", str(tree), "--index", str(db), "--json", "--yes"]
    if workers:
        command += ["--workers", str(workers)]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    memory = TreeMemory(process.pid)
    out, _ = process.communicate()
    memory.stop()
    seconds = time.monotonic() - started
    if process.returncode != 0:
        raise SystemExit(f"codewhere index failed ({process.returncode})")
    report = json.loads(out)
    return {
        "seconds": round(seconds, 1),
        "phases": {phase: round(took, 1) for phase, took in report["phases"].items()},  # as the indexer timed them
        "peak_rss_mb": round(memory.peak / 2**20),
        "peak_rss_indexer_mb": round(memory.peak_parent / 2**20),
        "files": report["files_kept"],
        "bytes_read": report["bytes_read"],
        "chunks": report["chunks"],
        "skipped": report["skipped"],
    }


def table_sizes(db: Path) -> dict[str, float]:
    import apsw

    connection = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    rows = connection.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    connection.close()
    return {name: round(size / 2**20, 1) for name, size in rows}


def indexed_bytes(db: Path) -> int:
    """The bytes of the files the index read (not skipped): what the size target divides by."""
    import apsw

    connection = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    total = connection.execute("SELECT coalesce(sum(size), 0) FROM files WHERE skip_reason IS NULL").get
    connection.close()
    return int(total)


def one_shot(tree: Path, db: Path, env: dict[str, str], runs: int) -> list[float]:
    times = []
    for i in range(runs):
        question = QUESTIONS[i % len(QUESTIONS)]
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "codewhere", "search", question, str(tree), "--index", str(db), "-k", "5"],
                       check=True, capture_output=True, env=env)
        times.append(time.monotonic() - started)
    return times


def graph_spec(index, name: str) -> str:  # noqa: ANN001 — an open Index
    """The name, or `path:line` of its kernel definition when copies under tools/ share the name."""
    found = index.candidates(name)
    if len(found) <= 1:
        return name
    kernel = [s for s in found if not s.path.startswith("tools/")] or found
    return f"{kernel[0].path}:{kernel[0].start_line}"


def warm(tree: Path, db: Path, rounds: int) -> dict[str, object]:
    from codewhere.api import Index
    from codewhere.types import Filters

    index = Index.open(tree, db, warm=True, create=False)
    started = time.monotonic()
    index.search(QUESTIONS[0], k=10)
    first = time.monotonic() - started
    reader = index.reader
    holds = not getattr(reader, "refused", True)  # past its limits a reader reads the store per query
    if holds:
        reader.keywords_built.wait(900)  # type: ignore[union-attr]  # the postings, built in a thread
    times: list[float] = []
    first_asks: list[float] = []  # past its limits: the store answers while the terms' postings are read
    answers = {}

    def ask(question: str, into: list[float]) -> None:
        started = time.perf_counter()
        hits = index.search(question, k=10)
        into.append(time.perf_counter() - started)
        answers[question] = [f"{h.path}:{h.start_line}-{h.end_line}" for h in hits[:3]]

    def terms_read() -> None:
        held = getattr(reader, "_held_terms", None)
        if held is not None:
            held.idle(900)

    for question in QUESTIONS:
        ask(question, first_asks)
    terms_read()
    for _ in range(rounds):
        for question in QUESTIONS:
            ask(question, times)
    new_asks: list[float] = []
    for question in NEW_QUESTIONS:
        ask(question, new_asks)
    terms_read()
    terms_held = getattr(reader, "_held_terms", None)
    held_postings = terms_held._held if terms_held is not None else None
    graph: dict[str, list[float]] = {"callers": [], "impact": []}
    specs = [graph_spec(index, name) for name in GRAPH_SYMBOLS]
    for _ in range(rounds):
        for spec in specs:
            started = time.perf_counter()
            index.callers(spec)
            graph["callers"].append(time.perf_counter() - started)
            started = time.perf_counter()
            index.impact(spec, depth=3)
            graph["impact"].append(time.perf_counter() - started)
    memory_mb = psutil.Process().memory_info().rss / 2**20
    kept = []
    # the vectors held (quantized past 200k) against the store's search: an exact scan of float32
    # vectors, unless the index is compact (then the same codes and shortlist, read from disk)
    compact = index.store.meta().get("compact") == "1"
    for question in QUESTIONS:
        vector = index.embedder().embed_query(question)
        stored = {cid for cid, _ in index.store.vector_search(vector, 100, Filters())}
        held = {cid for cid, _ in index.reader.vector_search(vector, 100, Filters())}
        kept.append(len(stored & held) / max(1, len(stored)))
    index.close()
    one_shot_index = Index.open(tree, db, warm=False, create=False)
    same_top3 = sum(
        [f"{h.path}:{h.start_line}-{h.end_line}" for h in one_shot_index.search(q, k=10)][:3] == answers[q] for q in QUESTIONS)
    one_shot_index.close()
    return {
        "first_search_s": round(first, 2),
        "reader_rss_mb": round(memory_mb),
        "compact_index": compact,
        "vector_top100_as_store": round(statistics.mean(kept), 3),
        "same_top3_as_one_shot": f"{same_top3} of {len(QUESTIONS)}",
        "held_in_memory": holds,
        "hybrid_first_ask_p50_ms": round(statistics.median(first_asks) * 1000, 2),
        "hybrid_p50_ms": round(statistics.median(times) * 1000, 2),
        "hybrid_new_questions_p50_ms": round(statistics.median(new_asks) * 1000, 2),
        "held_postings": held_postings,
        "callers_p50_ms": round(statistics.median(graph["callers"]) * 1000, 3),
        "impact_p50_ms": round(statistics.median(graph["impact"]) * 1000, 3),
        "answers": answers,
    }


def change_searchable(tree: Path, db: Path, env: dict[str, str]) -> float:
    """Edit one file, then time the one-shot `codewhere search` for a new word in it: the search's
    quick check finds the change and indexes that file before answering."""
    target = tree / "kernel" / "sys.c"
    if not target.is_file():  # a smaller tree, for a trial run
        target = next(tree.rglob("*.c"))
    original = target.read_bytes()
    stat = target.stat()
    word = "zqxjkelvinbenchmarkword"
    try:
        target.write_bytes(original + f"\n/* {word} */\n".encode())
        started = time.monotonic()
        found = subprocess.run([sys.executable, "-m", "codewhere", "search", word, str(tree), "--index", str(db),
                                "--mode", "keyword", "-k", "1"], check=True, capture_output=True, text=True, env=env)
        seconds = time.monotonic() - started
        if target.relative_to(tree).as_posix() not in found.stdout:
            raise SystemExit(f"the edited file was not found by the search after it: {found.stdout!r}")
        return seconds
    finally:
        target.write_bytes(original)
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def compile_package() -> None:
    """codewhere's bytecode, written before any process is timed, as `pip install` writes it: a
    checkout run with PYTHONDONTWRITEBYTECODE (or from a read-only tree) would otherwise compile
    every module in every one-shot search (0.1–0.15 s of each on the kernel)."""
    import codewhere

    compileall.compile_dir(Path(codewhere.__file__).parent, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "codewhere-kernel")
    parser.add_argument("--tree", type=Path, default=None, help="an unpacked kernel tree (default: fetch it)")
    parser.add_argument("--workers", type=int, default=None, help="index --workers (default: one per core)")
    parser.add_argument("--index", type=Path, default=None, help="index file (default: WORK/kernel.db)")
    parser.add_argument("--reuse", action="store_true", help="skip the cold index: measure the existing index file")
    parser.add_argument("--runs", type=int, default=5, help="one-shot CLI searches")
    parser.add_argument("--rounds", type=int, default=5, help="warm rounds over the questions")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    tree = args.tree or fetch_tree(args.work)
    db = args.index or args.work / "kernel.db"
    env = {**os.environ, "CODEWHERE_SHARED_VECTORS": "0"}  # every vector made by the run measured
    compile_package()
    result: dict[str, object] = {"tree": str(tree), "source_bytes": source_bytes(tree), "workers": args.workers}
    if not args.reuse:
        result["cold"] = cold_index(tree, db, args.workers, env)
        print(json.dumps(result["cold"]), flush=True)
    size = sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if not p.name.endswith(".lock"))
    result["index_mb"] = round(size / 2**20, 1)
    result["index_to_source"] = round(size / int(result["source_bytes"]), 2)  # type: ignore[call-overload]
    result["indexed_bytes"] = indexed_bytes(db)
    result["index_to_indexed"] = round(size / max(1, int(result["indexed_bytes"])), 2)  # the target: <= 2
    result["tables_mb"] = table_sizes(db)
    result["one_shot_s"] = [round(t, 2) for t in one_shot(tree, db, env, args.runs)]
    result["one_file_change_s"] = round(change_searchable(tree, db, env), 2)
    result["warm"] = warm(tree, db, args.rounds)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
