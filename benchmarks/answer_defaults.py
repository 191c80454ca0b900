"""Which MCP `search` defaults (k, max_lines) name the right function for the fewest tokens (issue 51).

    python benchmarks/answer_defaults.py --mirrors DIR --queries FUNCS.json --split dev --index-cache DIR

For each commit question of the split (mine_functions.py's output: the one function the commit
changed), the default search runs once at k = 10; the answer an agent would get at each k and
max_lines is built as the MCP server builds it (agent_answer.search_answer, secrets redacted, no
token cap) and scored: does a hit's range hold the function's first line (the answer *names* it),
and how many tokens (characters / 4, as the server counts) does it cost. Prints, per setting, the
named share, the median tokens and the named share per 1,000 tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere import confined  # noqa: E402
from codewhere.agent_answer import compact, search_answer, tokens  # noqa: E402
from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from semble_bench import SHARED, indexed_root, mirror_for  # noqa: E402
from splits import SPLITS  # noqa: E402

KS = (3, 5, 10)
LINES = (0, 4, 10)
NO_CAP = 10**9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"))
    parser.add_argument("--queries", required=True, type=Path)
    parser.add_argument("--split", choices=sorted(SPLITS), default="dev")
    parser.add_argument("--index-cache", type=Path, required=True)
    args = parser.parse_args()
    questions: dict[str, list[dict]] = defaultdict(list)
    for q in json.loads(args.queries.read_text()):
        if q["repo"] in SPLITS[args.split]:
            questions[q["repo"]].append(q)
    specs = {s["name"]: s for s in json.loads((SHARED / "repos.json").read_text())}
    named: dict[tuple[int, int], list[bool]] = defaultdict(list)
    cost: dict[tuple[int, int], list[int]] = defaultdict(list)
    settings = Settings(cache_dir=args.index_cache, models_dir=Settings.from_env().model_cache)
    for repo, asked in sorted(questions.items()):
        root = indexed_root(specs[repo], mirror_for(specs[repo]["url"], Path(args.mirrors)))
        with Index.open(root, settings=settings, warm=True) as index:
            index.refresh()

            def lines_of(path: str, index: Index = index) -> list[str] | None:
                try:
                    return confined.read_text(index.root, path).split("\n")
                except OSError:
                    return None

            for q in asked:
                hits = index.search(q["query"], k=max(KS))
                for k in KS:
                    shown = hits[:k]
                    hit = any(h.path == q["path"] and h.start_line <= q["line"] <= h.end_line for h in shown)
                    for max_lines in LINES:
                        answer = search_answer(shown, lines_of, max_lines, NO_CAP, False, True)
                        named[(k, max_lines)].append(hit)
                        cost[(k, max_lines)].append(tokens(compact(answer)))
    print(f"{sum(len(v) for v in questions.values())} questions, {args.split} split")
    print(f"{'k':>3} {'max_lines':>9} {'named':>7} {'tokens p50':>10} {'named / 1k tokens':>18}")
    for k in KS:
        for max_lines in LINES:
            share = sum(named[(k, max_lines)]) / len(named[(k, max_lines)])
            median = statistics.median(cost[(k, max_lines)])
            print(f"{k:>3} {max_lines:>9} {share:>7.3f} {median:>10.0f} {1000 * share / median:>18.3f}")


if __name__ == "__main__":
    main()
