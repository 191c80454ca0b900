"""What keeping an index's chunks in memory costs: the first load, its memory, and the update
after one file changes.

    python benchmarks/warm_store.py [--repo NAME ...] [--rounds 5]

Each repository of semble's benchmark (default: requests, gin, commons-lang, abseil-cpp,
laravel-framework) is copied from its checkout to a temporary folder and indexed there (text
only: the kept chunks hold no vectors). Then, `--rounds` times:

- *load*: a fresh store on the index file is asked to keep its chunks and reads one chunk;
- *one file changed*: a blank line is appended to the file with the most chunks (the worst
  case: the most chunks to reread), the index is refreshed, and the next read brings the kept
  chunks up to date. The refresh is timed apart.

Memory is what `tracemalloc` sees allocated by one more load. Medians are printed.
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
import tracemalloc
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from codewhere.store.sqlite import SqliteStore  # noqa: E402
from codewhere.store.warm import WarmReader  # noqa: E402
from codewhere.types import Filters  # noqa: E402
from semble_bench import SHARED, indexed_root, mirror_for  # noqa: E402

DEFAULT_REPOS = ["requests", "gin", "commons-lang", "abseil-cpp", "laravel-framework"]


def load(index_file: Path, chunk_id: int, trace: bool = False) -> tuple[float, int]:
    """(seconds, bytes allocated when `trace`) for a fresh store on `index_file` to keep its chunks."""
    store = SqliteStore.open(index_file)
    try:
        reader = WarmReader(store)
        if trace:
            tracemalloc.start()
        started = time.perf_counter()
        reader.chunk_rows([chunk_id], Filters())
        seconds = time.perf_counter() - started
        allocated = tracemalloc.get_traced_memory()[0] if trace else 0
        return seconds, allocated
    finally:
        tracemalloc.stop()
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", action="append", default=[])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"),
                        metavar="DIR", help="git mirrors of the benchmark repositories, DIR/<owner>+<name>/repo (or CODEWHERE_BENCH_MIRRORS)")
    args = parser.parse_args()
    specs = {s["name"]: s for s in json.loads((SHARED / "repos.json").read_text())}
    print("| repo | chunks | chunk text | memory | load | one file changed (its chunks) | refresh after the change |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.repo or DEFAULT_REPOS:
        spec = specs[name]
        with tempfile.TemporaryDirectory(prefix="warm-store-") as scratch:
            root = Path(scratch) / name
            shutil.copytree(indexed_root(spec, mirror_for(spec["url"], Path(args.mirrors))), root, symlinks=True)
            settings = Settings(cache_dir=Path(scratch) / "cache", models_dir=Settings.from_env().model_cache)
            index = Index.open(root, settings=settings, warm=True)
            index.refresh(vectors=False)
            store = index.store
            assert isinstance(store, SqliteStore)
            spans = store.chunk_spans(Filters())
            biggest, its_chunks = Counter(path for path, _, _ in spans).most_common(1)[0]
            first = store.chunk_at(spans[0][0], spans[0][1])
            assert first is not None
            some_chunk = first.id
            loads = [load(store.path, some_chunk)[0] for _ in range(args.rounds)]
            memory = load(store.path, some_chunk, trace=True)[1]
            reader = index.reader
            assert isinstance(reader, WarmReader)
            warm = reader.chunks()
            assert warm is not None, f"{name} is past the memory limits"
            updates, refreshes = [], []
            for _ in range(args.rounds):
                with open(root / biggest, "a", encoding="utf-8") as handle:
                    handle.write("\n")
                started = time.perf_counter()
                index.refresh(vectors=False)
                refreshed = time.perf_counter()
                reader.chunk_rows([some_chunk], Filters())
                updates.append(time.perf_counter() - refreshed)
                refreshes.append(refreshed - started)
            print(f"| {name} | {len(warm.rows):,} | {warm.text_bytes / 2**20:.1f} MB | {memory / 2**20:.1f} MB "
                  f"| {statistics.median(loads) * 1000:.0f} ms | {statistics.median(updates) * 1000:.1f} ms ({its_chunks}) "
                  f"| {statistics.median(refreshes) * 1000:.0f} ms |", flush=True)
            index.close()


if __name__ == "__main__":
    main()
