"""Keyword search from a warm reader's postings in memory against SQLite's FTS5, same run.

    python benchmarks/warm_keywords.py TREE [--queries 200] [--rounds 5]

Indexes TREE (once, in the cache), builds the postings as a warm reader does, and asks the same
questions of both: the question list is a handful of fixed questions plus random sets of 1–6
words from the corpus. Prints how many top-30 lists are identical, the largest score difference,
each side's p50 per question, the build time and the postings' size; then hybrid p50 of warm
searches with keyword search from memory and from FTS5, interleaved, and whether their top 10s
are identical.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from codewhere.api import Index
from codewhere.search.params import DEFAULT_PARAMS
from codewhere.search.query import parse_query
from codewhere.store.warm import WarmReader
from codewhere.store.warm_keywords import build
from codewhere.types import Filters, TermQuery

FIXED = ["how are database transactions rolled back on error", "QuerySet.bulk_create", "render a template with context",
         "csrf token validation", "skip the proxy for machines on the local network", "raise_for_status", "password hashing",
         "migrate the database schema", "paginate a list of objects", "send_mail", "url routing resolve path",
         "cache backend get or set"]


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with Index.open(args.tree, warm=True) as index:
        index.refresh()
        store = index.store
        warm = WarmReader(store).chunks()
        if warm is None:
            sys.exit("the tree is too big for a warm reader")
        files = {fid: (held, [warm.rows[c] for c in warm.chunk_ids.get(fid, [])]) for fid, held in warm.files.items()}
        started = time.perf_counter()
        postings = build(files)
        built = time.perf_counter() - started
        size = sum(a.nbytes for held in (postings.chunk_postings, postings.file_postings)
                   for a in (held.doc, held.in_path, held.in_text, held.starts, held.lengths, held.norm))
        words = [w for row in list(warm.rows.values())[:3000] for w in row.text.split() if w.isalpha() and len(w) > 3]
        rng = random.Random(0)
        questions = FIXED + [" ".join(rng.sample(words, rng.randint(1, 6))) for _ in range(args.queries)]
        weights = (DEFAULT_PARAMS.keyword_path_weight, DEFAULT_PARAMS.keyword_text_weight)
        same = asked = 0
        worst = 0.0
        fts: list[float] = []
        memory: list[float] = []
        for text in questions:
            terms = parse_query(text).terms
            if not terms:
                continue
            asked += 1
            started = time.perf_counter()
            from_store = store.keyword_search(TermQuery(terms, field_weights=weights), 30, Filters())
            fts.append(time.perf_counter() - started)
            started = time.perf_counter()
            from_memory = postings.search(terms, weights, 30)
            memory.append(time.perf_counter() - started)
            same += [c for c, _ in from_store] == [c for c, _ in from_memory]
            scores = dict(from_store)
            worst = max([worst] + [abs(scores[c] - s) for c, s in from_memory if c in scores])
        print(f"{asked} questions: {same} identical top-30 lists, largest score difference {worst:.1e}")
        print(f"keyword p50: FTS5 {median_ms(fts)} ms, memory {median_ms(memory)} ms")
        print(f"postings: {len(postings.chunk_postings.doc):,} for {len(postings.chunk_ids):,} chunks and {len(postings.vocabulary.ids):,} terms, "
              f"{size / 2**20:.1f} MB of arrays (as much again kept per file for the next build), built in {built:.2f} s")

        index.search(FIXED[0])
        reader = index.reader
        assert isinstance(reader, WarmReader)
        reader.keywords_built.wait(300)
        kind = type(store)
        hybrid: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.rounds):
            for in_memory in (True, False):
                kind.keywords_bm25 = in_memory  # type: ignore[attr-defined]
                for text in FIXED:
                    started = time.perf_counter()
                    index.search(text, k=10)
                    hybrid[in_memory].append(time.perf_counter() - started)
        kind.keywords_bm25 = True  # type: ignore[attr-defined]
        top_memory = [index.search(text, k=10) for text in FIXED]
        kind.keywords_bm25 = False  # type: ignore[attr-defined]
        top_fts = [index.search(text, k=10) for text in FIXED]
        kind.keywords_bm25 = True  # type: ignore[attr-defined]
        print(f"warm hybrid p50: keyword from memory {median_ms(hybrid[True])} ms, from FTS5 {median_ms(hybrid[False])} ms; "
              f"identical top 10s: {top_memory == top_fts}")


if __name__ == "__main__":
    main()
