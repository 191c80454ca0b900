"""The quality tier on one tree: fill time, searches during the fill, warm query p50 with and without.

    python benchmarks/tier_bench.py TREE [--rounds 3] [--json OUT]

TREE is indexed (static default) if needed, then its tier is dropped and filled again in a
background thread at the lowest priority and on one core, as `mcp`/`serve`/`watch` fill it
(`--threads 2`: as `codewhere index --quality` does), while this thread keeps searching: the hybrid p50 before the fill, during it and, once the tier is complete, with
it (MiniLM's query embedding included; each round embeds its questions afresh: cached queries
excluded).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path

from codewhere import tier, tier_filler
from codewhere.api import Index
from codewhere.config import Settings

QUESTIONS = (
    "enter a valid email address", "how are migrations squashed", "check that an uploaded image is valid",
    "format a date according to the user's locale", "reject a URL that is not well formed",
    "send an email to the site admins when an error happens", "show a message when the login is wrong",
    "where is the session cookie signed", "cache a rendered template fragment", "paginate a list of objects",
    "protect a form against cross site request forgery", "run raw SQL with parameters safely",
)


def p50_ms(index: Index, rounds: int, clear: bool) -> float:
    times = []
    for _ in range(rounds):
        if clear and index._tier_embedder is not None:  # noqa: SLF001 — a benchmark measures without the query cache
            index._tier_embedder._queries.clear()  # type: ignore[attr-defined]  # noqa: SLF001
        for question in QUESTIONS:
            started = time.perf_counter()
            index.search(question, k=10)
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--threads", type=int, default=tier_filler.FILL_THREADS, help="onnxruntime threads of the fill")
    args = parser.parse_args()
    settings = Settings.load(args.tree.resolve()).with_flags(quality=True)
    with Index.open(args.tree, settings=settings, warm=True) as index:
        index.refresh()
        index._tier_store().clear_tier()  # noqa: SLF001 — a cold fill every run
        static = p50_ms(index, args.rounds, clear=False)
        done = threading.Event()
        result: dict[str, float] = {}

        def fill() -> None:
            tier.lower_priority()
            with Index.open(args.tree, settings=settings) as writer:
                started = time.perf_counter()
                coverage = writer.fill_tier(threads=args.threads)
                result["fill_s"] = time.perf_counter() - started
                result["texts"] = coverage.total
            done.set()

        threading.Thread(target=fill, daemon=True).start()
        during: list[float] = []
        while not done.is_set():  # one round of the questions after another, as a busy agent asks
            during.append(p50_ms(index, 1, clear=False))
            done.wait(0.2)
        tiered = p50_ms(index, args.rounds, clear=True)
        out = {
            "tree": str(args.tree), "texts": result["texts"], "fill_s": round(result["fill_s"], 1),
            "texts_per_s": round(result["texts"] / result["fill_s"], 1), "threads": args.threads,
            "static_p50_ms": round(static, 2),
            "during_fill_p50_ms": round(statistics.median(during), 2), "tier_p50_ms": round(tiered, 2),
            "ranking": index.ranking_set.name,
        }
        print(json.dumps(out, indent=1))
        if args.json:
            args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
