"""The cost of ignore rules in a walk: `scan()` over a tree, timed with the one-regex prefilter
and with pathspec alone, runs interleaved, medians; both ways must keep the same files.
`--ignore-file FILE` (say the Linux kernel's root `.gitignore`) walks a copy of the tree with
that file as its root `.ignore`, which applies everywhere.

    python benchmarks/ignore_bench.py TREE [--ignore-file FILE] [--gitignore always] [--runs 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from codewhere import scan as scan_module
from codewhere.scan import ScanOptions, scan
from codewhere.types import FileRecord


def walk(root: Path, gitignore: str) -> tuple[float, list[str]]:
    started = time.perf_counter()
    kept = [item.path for item in scan(root, ScanOptions(gitignore=gitignore)) if isinstance(item, FileRecord)]
    return time.perf_counter() - started, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--ignore-file", type=Path, default=None,
                        help="patterns applied to the whole tree: written as the root .ignore of a copy of it")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--gitignore", choices=("auto", "always", "never"), default="auto",
                        help="always: .gitignore files count outside a git repository too (an unpacked tarball)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tree = args.tree
        if args.ignore_file is not None:
            tree = Path(scratch) / args.tree.name
            shutil.copytree(args.tree, tree, symlinks=True)
            (tree / ".ignore").write_text(args.ignore_file.read_text())
        report(*timed_walks(tree, args.gitignore, args.runs))


def timed_walks(tree: Path, gitignore: str, runs: int) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    combined = scan_module._any_pattern
    times: dict[str, list[float]] = {"prefilter": [], "pathspec alone": []}
    kept: dict[str, list[str]] = {}
    try:
        for _ in range(runs):
            for name, factory in (("prefilter", combined), ("pathspec alone", lambda spec: None)):
                scan_module._any_pattern = factory
                seconds, kept[name] = walk(tree, gitignore)
                times[name].append(seconds)
    finally:
        scan_module._any_pattern = combined
    assert kept["prefilter"] == kept["pathspec alone"], "the prefilter changed what is kept"
    return times, kept


def report(times: dict[str, list[float]], kept: dict[str, list[str]]) -> None:
    for name, samples in times.items():
        print(f"{name:>15}: {statistics.median(samples) * 1000:8.1f} ms median of {len(samples)}, "
              f"{len(kept[name])} files kept")
    ratio = statistics.median(times["pathspec alone"]) / statistics.median(times["prefilter"])
    print(f"pathspec alone / prefilter: {ratio:.2f}x")


if __name__ == "__main__":
    main()
