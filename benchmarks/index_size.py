"""What a SQLite index holds, table by table, against the text it indexes; and what its form costs a search.

    python benchmarks/index_size.py TREE [--compact-from N ...] [--rounds 5]

Builds TREE's index (the default model) once per `--compact-from` value in a throwaway cache
(the vector count from which an index keeps the compact form: byte-coded vectors, chunk texts
cut from the files, keyword postings without positions; store/quantized.py's QUANTIZE_FROM,
set for the run), then prints its size by table (SQLite's dbstat), the ratio to the bytes it
read, the p50 of a one-shot hybrid search (a process that holds nothing, as `codewhere search`),
and of a warm one once its keyword postings are held (every question below, `--rounds` times). Issue 52's target: Django 5.1.4 at most 2.5x.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

QUESTIONS = (
    "enter a valid email address", "how are migrations squashed", "the password is too similar to the username",
    "parse the accept language header", "QuerySet.filter", "cache a template fragment", "send mail to the site admins",
    "sign a cookie so it cannot be changed", "get_object_or_404", "paginate a list of objects",
)

BUILD = """
import json, sys, time
import codewhere.store.quantized as quantized
import codewhere.store.warm as warm
quantized.QUANTIZE_FROM = warm.EXACT_VECTOR_LIMIT = int(sys.argv[2])  # a warm reader holds what the index keeps
from codewhere.api import Index
started = time.perf_counter()
with Index.open(sys.argv[1]) as index:
    report = index.refresh()
    path = index.store.path
print(json.dumps({"seconds": time.perf_counter() - started, "bytes": report.bytes_read, "path": str(path)}))
"""

SEARCH = """
import json, sys, time
import codewhere.store.quantized as quantized
import codewhere.store.warm as warm
quantized.QUANTIZE_FROM = warm.EXACT_VECTOR_LIMIT = int(sys.argv[2])  # a warm reader holds what the index keeps
from codewhere.api import Index, SearchRequest
questions, rounds = json.loads(sys.argv[3]), int(sys.argv[4])
with Index.open(sys.argv[1]) as index:  # one-shot, as `codewhere search` asks: no rows held
    one_shot = []
    for q in questions:
        started = time.perf_counter()
        index.run(SearchRequest(q))
        one_shot.append((time.perf_counter() - started) * 1000)
with Index.open(sys.argv[1], warm=True) as index:
    started = time.perf_counter()
    index.run(SearchRequest(questions[0]))
    first = (time.perf_counter() - started) * 1000
    index.reader.keywords_built.wait(300)  # the postings held in memory are built in a thread
    held = (time.perf_counter() - started) * 1000
    times = []
    for _ in range(rounds):
        for q in questions:
            started = time.perf_counter()
            index.run(SearchRequest(q))
            times.append((time.perf_counter() - started) * 1000)
print(json.dumps({"one_shot_ms": sorted(one_shot)[len(one_shot) // 2], "first_ms": first, "held_ms": held,
                  "warm_times": times}))
"""


def tables(path: Path) -> dict[str, int]:
    import apsw

    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    return {str(n): int(s) for n, s in db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")}


def run(code: str, *args: str, cache: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True,
                         env={**os.environ, "CODEWHERE_CACHE_DIR": str(cache)})
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--compact-from", type=int, action="append", help="QUANTIZE_FROM for the run (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from codewhere.store.quantized import QUANTIZE_FROM

    results = {}
    for threshold in args.compact_from or [QUANTIZE_FROM]:
        with tempfile.TemporaryDirectory() as cache:
            built = run(BUILD, str(args.tree), str(threshold), cache=Path(cache))
            path = Path(str(built["path"]))
            sizes = tables(path)
            searched = run(SEARCH, str(args.tree), str(threshold), json.dumps(QUESTIONS), str(args.rounds), cache=Path(cache))
            warm_times = [float(t) for t in searched["warm_times"]]  # type: ignore[attr-defined]
            indexed = int(str(built["bytes"]))
            results[threshold] = {
                "file_bytes": path.stat().st_size, "indexed_bytes": indexed,
                "ratio": round(path.stat().st_size / indexed, 2), "build_s": round(float(str(built["seconds"])), 1),
                "one_shot_p50_ms": round(float(str(searched["one_shot_ms"])), 1),
                "first_ms": round(float(str(searched["first_ms"])), 1),
                "postings_held_ms": round(float(str(searched["held_ms"])), 1),
                "warm_p50_ms": round(statistics.median(warm_times), 2), "tables": dict(list(sizes.items())[:12]),
            }
        row = results[threshold]
        print(f"compact from {threshold:,} vectors: {row['file_bytes'] / 1e6:.1f} MB for {indexed / 1e6:.1f} MB of text "
              f"({row['ratio']}x); build {row['build_s']} s; one-shot search p50 {row['one_shot_p50_ms']} ms; warm: first "
              f"{row['first_ms']} ms, postings held after {row['postings_held_ms']} ms, then p50 {row['warm_p50_ms']} ms")
        for name, size in row["tables"].items():  # type: ignore[attr-defined]
            print(f"    {name:36} {size / 1e6:7.1f} MB")
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
