"""Fit ranking constants on a development split of semble's benchmark, never on reported repos.

    python benchmarks/fit_signals.py [--repo cobra ...] --grid path_weight=0,0.5,1 --grid coherence=0.15,0.5
        [--functions FUNCS.json] [--index-cache DIR]

Each repo (default: the dev split of benchmarks/splits.py; reported repos are refused) is indexed
once; every combination of the grid is scored (mean NDCG@10 over repos), best first. With
`--functions` (mine_functions.py's output) the fit has two objectives: the score is NDCG@10 on
semble's queries plus function-level MRR@10 on the commit questions of the same repositories
(function_bench.py's judgement), both printed. Reported numbers come from
`benchmarks/semble_bench.py --split reported` and `benchmarks/function_bench.py --split reported`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from codewhere.embed.registry import DEFAULT_MODEL  # noqa: E402
from codewhere.evaluate import IndexedSpans, load_query_file, score_query  # noqa: E402
from codewhere.search.params import RankingParams  # noqa: E402
from codewhere.search.ranking_sets import RankingSet, named_set, ranking_set_for  # noqa: E402
from codewhere.types import Filters  # noqa: E402
from function_bench import judge, summary  # noqa: E402
from semble_bench import SHARED, indexed_root, mirror_for  # noqa: E402
from splits import DEV, REPORTED  # noqa: E402

MIN_GAIN = 0.0005  # descent keeps a new value only above this gain: about a quarter of one query on ~550


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", action="append", help="repos to fit on (default: the dev split of benchmarks/splits.py)")
    parser.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...")
    parser.add_argument("--descent", type=int, default=0, metavar="ROUNDS",
                        help="instead of the full grid, change one constant at a time (each over its --grid values, "
                             "the others fixed) and keep a value only if it beats the best mean so far by MIN_GAIN")
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"),
                        metavar="DIR", help="git mirrors of the benchmark repositories, DIR/<owner>+<name>/repo (or CODEWHERE_BENCH_MIRRORS)")
    parser.add_argument("--functions", type=Path, metavar="FILE", help="mine_functions.py's output: add function-level MRR@10")
    parser.add_argument("--no-signal", action="append", default=[], metavar="NAME", help="fit with this signal off")
    parser.add_argument("--index-cache", type=Path, metavar="DIR", help="keep the indexes here between runs")
    parser.add_argument("--model", help="the embedding model, as `codewhere index --model` (default: the static default)")
    parser.add_argument("--ranking-set", metavar="NAME",
                        help="start from this set (search/ranking_sets.py; default: the one fitted for the model)")
    args = parser.parse_args()
    args.repo = args.repo or list(DEV)
    if overlap := set(args.repo) & set(REPORTED):
        raise SystemExit(f"{', '.join(sorted(overlap))}: reported repos (benchmarks/splits.py); fit on the dev split")
    specs = {s["name"]: s for s in json.loads((SHARED / "repos.json").read_text())}
    settings = Settings(cache_dir=args.index_cache or Path(tempfile.mkdtemp(prefix="fit-")),
                        models_dir=Settings.from_env().model_cache, model=args.model)
    base = named_set(args.ranking_set) if args.ranking_set else ranking_set_for(args.model or DEFAULT_MODEL)
    print(f"fitting from the set {base.name!r}", file=sys.stderr)
    grid: dict[str, list[float]] = {}
    for item in args.grid:
        name, values = item.split("=", 1)  # an unknown name or a value that is no number stops here
        grid[name.lower()] = [getattr(base.params.with_values({name: v}), name.lower()) for v in values.split(",")]
    params = base.params
    commits: dict[str, list[dict]] = defaultdict(list)
    for q in json.loads(args.functions.read_text()) if args.functions else []:
        if q["repo"] in args.repo:
            commits[q["repo"]].append(q)
    repos = []
    for name in args.repo:
        spec = specs[name]
        root = indexed_root(spec, mirror_for(spec["url"], Path(args.mirrors)))
        index = Index.open(root, settings=settings, warm=True)
        index.refresh()
        spans = IndexedSpans(index.store.chunk_spans(Filters()))
        queries = load_query_file(SHARED / "annotations" / f"{name}.json").queries
        indexed = [spans.count(q) for q in queries]
        repos.append((name, index, queries, indexed))
    def score(params: RankingParams) -> tuple[float, dict[str, float]]:
        per_repo, by_category = {}, defaultdict(list)
        outcomes = []
        for name, index, queries, indexed in repos:
            index.ranking_override = RankingSet("fit", params, base.off)
            outcomes += [judge(index.search(q["query"], k=10, disabled_signals=args.no_signal), q, 0.0) for q in commits[name]]
            scores = [score_query(index.search(q.query, k=10, disabled_signals=args.no_signal), q, n)[1] for q, n in zip(queries, indexed, strict=True)]
            per_repo[name] = sum(scores) / len(scores)
            per_category = defaultdict(list)
            for q, s in zip(queries, scores, strict=True):
                per_category[q.category].append(s)
            for category, values in per_category.items():
                by_category[category].append(sum(values) / len(values))
        # per category as semble_bench.py reports it: the mean over repos of each repo's mean
        ndcg = sum(per_repo.values()) / len(per_repo)
        line = f"  ndcg {ndcg:.4f}  " + "  ".join(f"{c} {sum(v) / len(v):.4f}" for c, v in sorted(by_category.items()))
        if not outcomes:
            print(line, file=sys.stderr)
            return ndcg, per_repo
        functions = summary(outcomes)
        per_repo["function_mrr"], per_repo["function_top5"] = functions["mrr"], functions["top5"]
        print(f"{line}  function mrr {functions['mrr']:.4f} top5 {functions['top5']:.4f} file top5 {functions['file_top5']:.4f}",
              file=sys.stderr)
        return ndcg + functions["mrr"], per_repo

    if args.descent:
        best, _ = score(params)
        print(f"{best:.4f} start {{{', '.join(f'{n}: {getattr(params, n)}' for n in grid)}}}", file=sys.stderr, flush=True)
        for _ in range(args.descent):
            for name, values in grid.items():
                for value in values:
                    trial = params.with_values({name: value})
                    if trial == params:
                        continue
                    mean, _ = score(trial)
                    print(f"{mean:.4f} {name}={value}", file=sys.stderr, flush=True)
                    if mean > best + MIN_GAIN:
                        best, params = mean, trial
        final = {name: getattr(params, name) for name in grid}
        mean, per_repo = score(params)
        print(json.dumps({"score": round(mean, 4), "constants": final, "per_repo": {k: round(v, 4) for k, v in per_repo.items()}}, indent=1))
        return
    results = []
    for combo in itertools.product(*grid.values()):
        mean, per_repo = score(base.params.with_values(dict(zip(grid, combo, strict=True))))
        results.append((mean, dict(zip(grid, combo, strict=True)), per_repo))
        print(f"{mean:.4f} {dict(zip(grid, combo, strict=True))}", file=sys.stderr, flush=True)
    results.sort(key=lambda r: -r[0])
    print(json.dumps([{"score": round(m, 4), "constants": c, "per_repo": {k: round(v, 4) for k, v in p.items()}} for m, c, p in results[:10]], indent=1))

if __name__ == "__main__":
    main()
