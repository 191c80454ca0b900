"""One hash of every ranking codewhere gives on semble's queries: the check that a refactoring
changed no ranking.

    python benchmarks/rank_digest.py [--split dev] [--repo NAME ...] [--mirrors DIR] [--index-cache DIR]

For each repository (its pinned revision, exported as semble_bench.py does), every annotated
query is searched in hybrid mode, in fusion mode (no signal) and with each signal off in turn;
each hit's path, lines, score (to 9 digits) and `why` go into the hash. Prints the hash per
repository and over all; equal hashes before and after a change mean identical rankings. Indexes
are kept in --index-cache (default: a temporary folder) so a second run only searches.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from codewhere.evaluate import load_query_file  # noqa: E402
from codewhere.search.ranking import SIGNALS  # noqa: E402
from semble_bench import SHARED, indexed_root, mirror_for  # noqa: E402
from splits import SPLITS  # noqa: E402


def repo_digest(index: Index, queries: list[str]) -> str:
    digest = hashlib.sha256()
    for disabled in ((), ("all",), *((name,) for name in SIGNALS)):
        for query in queries:
            hits = index.search(query, k=10, disabled_signals=disabled)
            rows = [(h.path, h.start_line, h.end_line, round(h.score, 9), h.why) for h in hits]
            digest.update(json.dumps([disabled, query, rows], sort_keys=True, default=str).encode())
    return digest.hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=sorted(SPLITS), default="dev")
    parser.add_argument("--repo", action="append", default=[])
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"),
                        help="folder of git mirrors, <owner>+<name>/repo (or CODEWHERE_BENCH_MIRRORS)")
    parser.add_argument("--index-cache", type=Path, default=None)
    args = parser.parse_args()
    specs = {s["name"]: s for s in json.loads((SHARED / "repos.json").read_text())}
    names = args.repo or list(SPLITS[args.split])
    cache = args.index_cache or Path(tempfile.mkdtemp(prefix="rank-digest-"))
    settings = Settings(cache_dir=cache, models_dir=Settings.from_env().model_cache)
    total = hashlib.sha256()
    for name in names:
        spec = specs[name]
        root = indexed_root(spec, mirror_for(spec["url"], Path(args.mirrors)))
        queries = [q.query for q in load_query_file(SHARED / "annotations" / f"{name}.json").queries]
        with Index.open(root, settings=settings, warm=True) as index:
            index.refresh()
            digest = repo_digest(index, queries)
        total.update(digest.encode())
        print(f"{name:<20} {digest}", flush=True)
    print(f"{'all':<20} {total.hexdigest()[:12]}")


if __name__ == "__main__":
    main()
