"""Five worktrees of one repository: index time and disk, sharing vectors or not.

    python benchmarks/worktree_bench.py [--worktrees 5]

Django 5.1.4 (sdist) committed to a git repository; four more worktrees on their own branches,
each with a different handful of files edited (as topic branches are). Every worktree is then
indexed twice, in the same run: once as five independent indexes (a cache dir each, no vector
cache), then with one cache dir for all (a text embedded for one worktree is taken from the
machine-wide vector cache by the next: store/shared_vectors.py). The independent run goes first,
so the shared one is not helped by a warmer file cache than its baseline had.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index  # noqa: E402
from corpora import from_sdist, git, git_snapshot  # noqa: E402

EDITED = ["django/utils/text.py", "django/db/models/query.py", "django/http/request.py", "django/forms/fields.py",
          "django/template/base.py", "django/urls/resolvers.py", "django/core/cache/backends/base.py"]


def worktrees(tree: Path, scratch: Path, count: int) -> list[Path]:
    main = git_snapshot(tree, scratch / "wt0")
    roots = [main]
    for n in range(1, count):
        root = scratch / f"wt{n}"
        git(main, "worktree", "add", "-q", "-b", f"topic{n}", str(root))
        for rel in EDITED[n % len(EDITED):][:3]:  # each branch edits its own few files
            path = root / rel
            path.write_text(path.read_text() + f"\n\ndef topic_{n}_helper():\n    return {n}\n")
        roots.append(root)
    return roots


def disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def index_all(roots: list[Path], caches: list[Path], share: bool) -> dict[str, object]:
    seconds, embedded, reused = [], [], []
    os.environ["CODEWHERE_SHARED_VECTORS"] = "1" if share else "0"
    for root, cache in zip(roots, caches, strict=True):
        os.environ["CODEWHERE_CACHE_DIR"] = str(cache)
        started = time.perf_counter()
        with Index.open(root) as index:
            report = index.refresh()
        seconds.append(round(time.perf_counter() - started, 2))
        embedded.append(report.vectors_written)
        reused.append(report.vectors_reused)
    total_disk = sum(disk(c) for c in set(caches))
    return {"index seconds per worktree": seconds, "total index seconds": round(sum(seconds), 2),
            "texts embedded per worktree": embedded, "vectors taken from the shared cache": reused,
            "total disk MB (indexes and vector cache)": round(total_disk / 2**20, 1),
            "of which the shared vector cache MB": round(sum(disk(c / "vectors") for c in set(caches)) / 2**20, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worktrees", type=int, default=5)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="worktree-bench-"))
    try:
        roots = worktrees(from_sdist("Django", "5.1.4"), scratch, args.worktrees)
        alone = index_all(roots, [scratch / f"cache-{n}" for n in range(len(roots))], share=False)
        shared = index_all(roots, [scratch / "shared-cache"] * len(roots), share=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({f"{args.worktrees} worktrees of Django 5.1.4, one shared cache": shared,
                      f"{args.worktrees} worktrees of Django 5.1.4, independent": alone,
                      "time shared / independent": round(float(shared["total index seconds"])  # type: ignore[arg-type]
                                                         / float(alone["total index seconds"]), 3)}, indent=1))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
