"""Freshness with the file watcher: save-to-searchable, and a branch switch against a cold index.

    python benchmarks/watch_bench.py [--writes 30] [--runs 3]

Save-to-searchable: a copy of Django 5.1.4 (sdist) in a git repository, a watcher and a warm
reader beside it as in `codewhere mcp`; each write appends a function with a new name to one of
eight files and the clock runs until a keyword search returns it. Without a watcher the same
write is found by a search that checks every file first (what each MCP answer did before).

Branch switch: a repository with Django 5.0.10 on one branch and 5.1.4 on another; indexed on
5.0.10 with the watcher running, then `git checkout` to 5.1.4: the time until the watcher has
applied it, and the chunks embedded, against a cold index of 5.1.4.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index  # noqa: E402
from codewhere.watch import Watcher  # noqa: E402
from corpora import from_sdist, git, git_snapshot  # noqa: E402

FILES = ["django/utils/text.py", "django/db/models/query.py", "django/http/request.py", "django/forms/fields.py",
         "django/contrib/auth/models.py", "django/core/cache/backends/base.py", "django/template/base.py",
         "django/urls/resolvers.py"]
def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def until_found(reader: Index, name: str, deadline: float = 30.0) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < deadline:
        hits = reader.search(name, k=1, mode="keyword")
        if hits and name in hits[0].snippet:
            return time.perf_counter() - started
        time.sleep(0.005)
    raise SystemExit(f"{name} not searchable within {deadline} s")


def save_to_searchable(root: Path, writes: int, watch: bool) -> list[float]:
    watcher = Watcher(root, lambda: Index.open(root)).start() if watch else None
    if watcher is not None and not watcher.wait_ready():
        raise SystemExit(f"cannot watch {root}: {watcher.status.describe()}")
    reader = Index.open(root, warm=True)
    if watcher is None:
        reader.refresh()
    reader.search("warm up", k=1)
    seconds = []
    try:
        for i in range(writes):
            path = root / FILES[i % len(FILES)]
            name = f"bench_marker_{'w' if watch else 'c'}_{i}_{time.time_ns()}"
            started = time.perf_counter()
            with path.open("a") as out:
                out.write(f"\n\ndef {name}():\n    return {i}\n")
            if watcher is None:
                reader.refresh_if_free()  # what an answer did before the watcher
            until_found(reader, name)
            seconds.append(time.perf_counter() - started)
            time.sleep(0.2)
    finally:
        reader.close()
        if watcher is not None:
            watcher.stop()
    return seconds


def branch_switch(old: Path, new: Path, scratch: Path) -> dict[str, object]:
    # without the machine-wide vector cache: this measures what one index reuses of itself
    # (the cache would also hold 5.1.4's vectors from the runs above)
    os.environ["CODEWHERE_SHARED_VECTORS"] = "0"
    root = git_snapshot(old, scratch / "switch")
    git(root, "checkout", "-qb", "new")
    for entry in root.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    shutil.copytree(new, root, symlinks=True, dirs_exist_ok=True)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "new release")
    git(root, "checkout", "-q", "main")
    reports = []
    watcher = Watcher(root, lambda: Index.open(root), on_report=reports.append).start()
    started = time.perf_counter()
    watcher.wait_ready()
    first = time.perf_counter() - started
    applied = watcher.status.applied
    started = time.perf_counter()
    git(root, "checkout", "-q", "new")
    checkout = time.perf_counter() - started
    if not watcher.wait_applied(applied + 1, 600):
        raise SystemExit("the switch was not applied within 600 s")
    time.sleep(1.0)  # a straggling event would make a second refresh: count it if it comes
    switched = time.perf_counter() - started
    watcher.stop()
    after = reports[1:]
    cold_root = git_snapshot(new, scratch / "cold")
    started = time.perf_counter()
    with Index.open(cold_root) as cold:
        report = cold.refresh()
    return {
        "first index (old release), s": round(first, 2), "git checkout, s": round(checkout, 2),
        "checkout to applied, s (includes 1 s wait for stragglers)": round(switched, 2),
        "refreshes for the switch": len(after),
        "files added/changed/removed": [sum(r.files_added for r in after), sum(r.files_changed for r in after),
                                        sum(r.files_removed for r in after)],
        "vectors embedded by the switch": sum(r.vectors_written for r in after),
        "refresh seconds (sum)": round(sum(r.seconds for r in after), 2),
        "cold index of the new release, s": round(report.seconds, 2),
        "vectors embedded by the cold index": report.vectors_written,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3, help="save-to-searchable runs (each a fresh watcher)")
    parser.add_argument("--skip-switch", action="store_true")
    parser.add_argument("--only-switch", action="store_true")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="watch-bench-"))
    os.environ.setdefault("CODEWHERE_CACHE_DIR", str(scratch / "cache"))
    results: dict[str, object] = {}
    try:
        django = from_sdist("Django", "5.1.4")
        root = git_snapshot(django, scratch / "django")
        if not args.only_switch:
            Index.open(root).refresh()
        for label, watch in [] if args.only_switch else (("watcher", True), ("no watcher (check every file, then search)", False)):
            runs = [save_to_searchable(root, args.writes, watch) for _ in range(args.runs)]
            values = [v for run in runs for v in run]
            results[f"save-to-searchable on Django 5.1.4, {label}"] = {
                "p50 ms": round(statistics.median(values) * 1000, 1), "p95 ms": round(percentile(values, 0.95) * 1000, 1),
                "max ms": round(max(values) * 1000, 1), "writes": len(values),
                "p95 ms per run": [round(percentile(run, 0.95) * 1000, 1) for run in runs],
            }
        if not args.skip_switch:
            results["branch switch Django 5.0.10 -> 5.1.4"] = branch_switch(
                from_sdist("Django", "5.0.10"), django, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
