"""Symbol queries made from the dev repositories' own definitions: a fitting aid where semble's are too few.

    python benchmarks/symbol_probe.py [--kind type|function] [--without-grammar] [--repo cobra ...] [--json OUT]

semble's 91 dev symbol queries score 0.998 and cannot tell two symbol rules apart. This makes more:
in each repo (default: the dev split; reported repos are refused, as in fit_signals.py), the type-like
symbols (classes, structs, interfaces, traits, enums, modules, types) that the index's parser finds
in exactly one code file and nowhere else, longer than one line (not a declaration like `mod file;`)
and at least four characters long, most mentioned first
(the number of files naming them as a word); the query is the bare name, the gold its file, scored
as semble scores (top 10, file-level NDCG@10). The parser that picks the gold is codewhere's own, so
this measures ranking, not whether definitions are found; languages without a grammar here give
no queries. `--kind function`: functions and methods instead, only names that read as code (with an
underscore or an inner capital: `render_template`, `createStore`), since `default` or `update` are
words before they are names. `--without-grammar`: the files in languages without a grammar here
instead, their names from the regular-expression definitions (defs.py), a leading capital for a
type, a code-like name for a function.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from codewhere.defs import find_definitions  # noqa: E402
from codewhere.evaluate import EvalQuery, Target, score_query  # noqa: E402
from codewhere.languages import language_of  # noqa: E402
from codewhere.parse import has_grammar  # noqa: E402
from codewhere.types import FileKind, Filters  # noqa: E402
from semble_bench import SHARED, indexed_root, mirror_for  # noqa: E402
from splits import DEV, REPORTED  # noqa: E402

KINDS = {
    "type": frozenset({"class", "struct", "interface", "trait", "enum", "module", "type", "protocol", "object"}),
    "function": frozenset({"function", "method"}),
}
MIN_NAME_CHARS = 4
_NAME = re.compile(r"[A-Za-z_]\w*")
_CODE_LIKE = re.compile(r"\w+_\w+|\w*[a-z][A-Z]\w*")
_WORD = re.compile(r"\w+")


def probe_queries(
    index: Index, root: Path, per_repo: int, kind: str = "type", without_grammar: bool = False
) -> list[EvalQuery]:
    store = index.store
    code_only = Filters(exclude_kinds=tuple(k for k in FileKind if k is not FileKind.CODE))
    code = set(store.indexed_paths(code_only))
    texts = {path: _read(root / path) for path in code}  # each code file read once
    defined_in: dict[str, set[str]] = defaultdict(set)
    wanted_kind: set[str] = set()
    for path in store.indexed_paths(Filters()):
        for symbol in store.outline(path):
            defined_in[symbol.name].add(path)
            # one line is a declaration whose body lives elsewhere (`mod file;`, `struct Curl_easy;`)
            if not without_grammar and path in code and symbol.kind in KINDS[kind] and symbol.end_line > symbol.start_line:
                wanted_kind.add(symbol.name)
        if without_grammar and path in code and not has_grammar(language := language_of(path)):
            for _, name in find_definitions(texts[path], language):
                defined_in[name].add(path)
                if name[0].isupper() == (kind == "type"):
                    wanted_kind.add(name)
    names = [n for n in wanted_kind if len(defined_in[n]) == 1 and len(n) >= MIN_NAME_CHARS and _NAME.fullmatch(n)
             and (kind == "type" or _CODE_LIKE.fullmatch(n))]
    wanted = set(names)
    mentions: Counter[str] = Counter()
    for text in texts.values():
        mentions.update(set(_WORD.findall(text)) & wanted)
    names.sort(key=lambda n: (-mentions[n], n))
    return [EvalQuery(n, (Target(next(iter(defined_in[n]))),), category="symbol") for n in names[:per_repo]]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", action="append", help="repos to probe (default: the dev split of benchmarks/splits.py)")
    parser.add_argument("--kind", choices=sorted(KINDS), default="type")
    parser.add_argument("--without-grammar", action="store_true",
                        help="probe the files in languages without a grammar, by their regular-expression definitions")
    parser.add_argument("--per-repo", type=int, default=15)
    parser.add_argument("--json", type=Path, help="write every query, its gold file, rank and top three files here")
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"),
                        metavar="DIR", help="git mirrors of the benchmark repositories, DIR/<owner>+<name>/repo (or CODEWHERE_BENCH_MIRRORS)")
    args = parser.parse_args()
    repos = args.repo or list(DEV)
    if overlap := set(repos) & set(REPORTED):
        raise SystemExit(f"{', '.join(sorted(overlap))}: reported repos (benchmarks/splits.py); probe the dev split")
    specs = {s["name"]: s for s in json.loads((SHARED / "repos.json").read_text())}
    settings = Settings(cache_dir=Path(tempfile.mkdtemp(prefix="symbol-probe-")), models_dir=Settings.from_env().model_cache)
    means: dict[str, float] = {}
    details: dict[str, list[dict[str, object]]] = {}
    for name in repos:
        spec = specs[name]
        root = indexed_root(spec, mirror_for(spec["url"], Path(args.mirrors)))
        index = Index.open(root, settings=settings, warm=True)
        index.refresh()
        queries = probe_queries(index, root, args.per_repo, args.kind, args.without_grammar)
        scores = []
        for q in queries:
            hits = index.search(q.query, k=10)
            rank, ndcg = score_query(hits, q)
            scores.append(ndcg)
            details.setdefault(name, []).append(
                {"query": q.query, "gold": q.relevant[0].path, "rank": rank, "top": [h.path for h in hits[:3]]}
            )
        index.close()
        if scores:
            means[name] = statistics.mean(scores)
        print(f"{name:<20} {len(queries):>3} queries  NDCG@10 {means.get(name, float('nan')):.3f}", flush=True)
    half = len(repos) // 2  # the two halves of the list, as the dev ablation table splits them
    halves = [[means[r] for r in part if r in means] for part in (repos[:half], repos[half:])]
    print(f"mean over {len(means)} repos with queries: {statistics.mean(means.values()):.4f}  "
          f"(halves {' / '.join(f'{statistics.mean(h):.4f}' for h in halves if h)})")
    if args.json:
        args.json.write_text(json.dumps(details, indent=1))


if __name__ == "__main__":
    main()
