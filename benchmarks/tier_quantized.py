"""The quality tier held exact (float32) against quantized (sign bits and byte codes, past
`QUANTIZE_FROM` vectors): warm hybrid p50 of each, alternating in one process, and how much of
the exact vector list the quantized one keeps.

    python benchmarks/tier_quantized.py TREE [--rounds 5] [--json OUT]

TREE must be indexed with its tier complete (`codewhere index --quality TREE`). Each round embeds
its questions afresh (MiniLM's query embedding included, cached queries excluded), as
tier_bench.py measures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere import tier  # noqa: E402
from codewhere.api import Index  # noqa: E402
from codewhere.types import Filters  # noqa: E402
from tier_bench import QUESTIONS  # noqa: E402


def _held(index: Index, quantize_from: int) -> None:
    """The tier read again, held exact or quantized."""
    tier.QUANTIZE_FROM = quantize_from
    index._tier_cache = None  # noqa: SLF001 — the benchmark switches the form the reader holds
    if index.tier_reader() is None:
        raise SystemExit("the tier is not complete: run `codewhere index --quality TREE` first")


def _p50(index: Index) -> float:
    embedder = index.tier_embedder()
    embedder._queries.clear()  # type: ignore[attr-defined]  # noqa: SLF001 — no cached queries
    times = []
    for question in QUESTIONS:
        started = time.perf_counter()
        index.search(question, k=10)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    forms = {"exact": 1 << 62, "quantized": tier.QUANTIZE_FROM}
    with Index.open(args.tree, warm=True, create=False) as index:
        index.search("warm up", k=10)
        kept = []
        for question in QUESTIONS:
            vector = index.tier_embedder().embed_query(question)
            lists = {}
            for form, threshold in forms.items():
                _held(index, threshold)
                reader = index.tier_reader()
                assert reader is not None
                lists[form] = [cid for cid, _ in reader.vector_search(vector, 30, Filters())]
            kept.append(len(set(lists["exact"]) & set(lists["quantized"])) / 30)
        p50s: dict[str, list[float]] = {form: [] for form in forms}
        for _ in range(args.rounds):
            for form, threshold in forms.items():
                _held(index, threshold)
                index.search("warm up", k=10)
                p50s[form].append(_p50(index))
    result = {"tree": str(args.tree), "rounds": args.rounds, "vector_top30_kept": round(statistics.mean(kept), 3),
              **{f"{form}_p50_ms": round(1000 * statistics.median(values), 1) for form, values in p50s.items()},
              "per_round_ms": {form: [round(1000 * v, 1) for v in values] for form, values in p50s.items()}}
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
