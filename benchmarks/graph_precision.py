"""How right are the graph's edges? Name resolution and jedi against SCIP ground truth.

    python benchmarks/graph_precision.py [--mirrors /work/.mirror] [--repos requests,flask,zod,trpc] [--runs 3]

For each repository the real SCIP indexer (scip-python 0.6.6, scip-typescript 0.4.0, installed
from npm into the benchmark cache: not part of codewhere's install) writes the ground truth. Then
four indexes of the same tree: names alone, names + jedi (Python), names + a language server
(pyright-langserver 1.1.414, typescript-language-server 6.0.2 over TypeScript 5.9.3), names + the
SCIP file merged.
For every call edge the SCIP document answers: the truth is the symbol it names, or "no symbol of
the repository" (a library, a parameter, a variable).

- in-repository call sites: call edges whose truth is a symbol of the repository;
- resolved: of those, the share a method pins to some symbol;
- precision: of the edges a method pins to a symbol (where the truth is known), the share it pins
  to the right one; per name-resolution level too;
- times: the SCIP indexer's run, the merge, jedi per 1,000 call sites; graph query p50 with the
  merged edges (callers, impact depth 3) over 20 symbols × --runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere import graph  # noqa: E402
from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from codewhere.precise.jedi_pass import jedi_answers  # noqa: E402
from codewhere.precise.lsp import installed_servers, lsp_answers  # noqa: E402
from codewhere.precise.scip import read_scip  # noqa: E402
from codewhere.store.base import IndexWriter  # noqa: E402
from codewhere.types import Filters  # noqa: E402
from corpora import CACHE, from_git, requests_corpus  # noqa: E402
from semble_bench import SHARED, mirror_for  # noqa: E402

NPM_TOOLS = {"@sourcegraph/scip-python": "0.6.6", "@sourcegraph/scip-typescript": "0.4.0", "pyright": "1.1.414",
             "typescript-language-server": "6.0.2", "typescript": "5.9.3"}
# name → (language, subfolder the SCIP indexer and codewhere both take as root; "" for the whole tree)
REPOS = {"requests": ("python", ""), "flask": ("python", ""), "zod": ("typescript", "packages/zod"),
         "trpc": ("typescript", "packages/server")}


def tools() -> Path:
    """The SCIP indexers and the language servers from npm, into the benchmark cache (once)."""
    prefix = CACHE / "npm-scip"
    bin_dir = prefix / "node_modules" / ".bin"
    if not all((bin_dir / tool).exists() for tool in ("scip-python", "scip-typescript", "pyright-langserver",
                                                       "typescript-language-server")):
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--prefix", str(prefix),
                        *(f"{name}@{version}" for name, version in NPM_TOOLS.items())], check=True)
    return bin_dir


def tree(name: str, mirrors: Path) -> Path:
    if name == "requests":
        return requests_corpus(None)
    spec = next(r for r in json.loads((SHARED / "repos.json").read_text()) if r["name"] == name)
    source = mirror_for(spec["url"], mirrors)
    if source is None:
        raise SystemExit(f"{name}: no mirror of {spec['url']} under {mirrors}")
    return from_git(source, spec["revision"], name)


def scip_index(name: str, language: str, root: Path, bin_dir: Path) -> tuple[Path, float]:
    out = CACHE / "scip" / f"{name}.scip"
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if language == "python":
        if (root / "src").is_dir() and not (root / "pyrightconfig.json").exists():
            # the tests import the package: from src/, not from a release installed on the machine
            (root / "pyrightconfig.json").write_text('{"extraPaths": ["src"]}\n')
        command = [str(bin_dir / "scip-python"), "index", ".", "--project-name", name, "--project-version", "0",
                   "--output", str(out), "--quiet"]
    else:
        command = [str(bin_dir / "scip-typescript"), "index", "--output", str(out)]
        if not (root / "tsconfig.json").exists():
            command.append("--infer-tsconfig")
    subprocess.run(command, cwd=root, check=True, capture_output=True, env={**os.environ, "NODE_OPTIONS": "--max-old-space-size=8192"})
    return out, time.perf_counter() - started


Key = tuple[str, int, str]  # path, line, name as written
Target = tuple[str, str, int] | None  # path, qualified name, start line


def edges_of(index: Index) -> dict[Key, tuple[Target, str]]:
    store = index.store
    rows = [r for r in store.resolved_edges() if r[0].kind == "call"]
    symbols = store.symbols_by_id(sorted({t for _, t, _ in rows if t is not None}))
    out: dict[Key, tuple[Target, str]] = {}
    for site, target, resolution in rows:
        row = symbols.get(target) if target is not None else None
        out.setdefault((site.path, site.line, site.target_name),
                       ((row.path, row.qualified_name, row.start_line) if row else None, resolution))
    return out


def fresh(root: Path, cache: Path, name: str) -> Index:
    index = Index.open(root, settings=Settings(cache_dir=cache / name))
    index.refresh(vectors=False)
    return index


def same_target(a: Target, b: Target) -> bool:
    """One definition: the same symbol, or overloads of one (same path and qualified name)."""
    return a == b or (a is not None and b is not None and a[:2] == b[:2])


def score(method: dict[Key, tuple[Target, str]], truth: dict[Key, tuple[Target, str]]) -> dict[str, object]:
    answered = {k: t for k, (t, how) in truth.items() if how == graph.Resolution.SCIP}
    in_repo = [k for k, t in answered.items() if t is not None]
    resolved = [k for k in in_repo if method.get(k, (None, ""))[0] is not None]
    right = [k for k in resolved if same_target(method[k][0], answered[k])]
    pinned = [k for k in method if method[k][0] is not None and k in answered]
    correct = [k for k in pinned if same_target(method[k][0], answered[k])]
    by_level: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for k in pinned:
        level = method[k][1]
        by_level[level][0] += same_target(method[k][0], answered[k])
        by_level[level][1] += 1
    return {
        "call_edges": len(truth), "answered_by_scip": len(answered), "in_repo": len(in_repo),
        "resolved": round(len(resolved) / len(in_repo), 3) if in_repo else None,
        "resolved_right": round(len(right) / len(in_repo), 3) if in_repo else None,
        "precision": round(len(correct) / len(pinned), 3) if pinned else None,
        "pinned": len(pinned),
        "precision_by_level": {level: (round(ok / n, 3), n) for level, (ok, n) in sorted(by_level.items())},
    }


def query_p50s(index: Index, runs: int) -> dict[str, float]:
    store = index.store
    symbols = [s for p in store.indexed_paths(Filters()) for s in store.outline(p) if s.kind in {"function", "method"}]
    random.Random(0).shuffle(symbols)
    samples: dict[str, list[float]] = {"callers": [], "impact_depth3": []}
    for _ in range(runs):
        for s in symbols[:20]:
            started = time.perf_counter()
            graph.callers(store, s)
            samples["callers"].append(time.perf_counter() - started)
            started = time.perf_counter()
            graph.impact(store, s, 3)
            samples["impact_depth3"].append(time.perf_counter() - started)
    return {k: round(statistics.median(v) * 1000, 3) for k, v in samples.items()}


def bench(name: str, mirrors: Path, runs: int) -> dict[str, object]:
    language, sub = REPOS[name]
    whole = tree(name, mirrors)
    root = whole / sub if sub else whole
    scip_file, scip_seconds = scip_index(name, language, root, tools())
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        started = time.perf_counter()
        names_index = fresh(root, cache, "names")
        index_seconds = time.perf_counter() - started
        names = edges_of(names_index)
        calls = sum(1 for _ in names)
        result: dict[str, object] = {"repo": name, "language": language, "index_seconds": round(index_seconds, 2),
                                     "scip_indexer_seconds": round(scip_seconds, 1), "call_edges": calls}

        store: IndexWriter = names_index.store
        started = time.perf_counter()
        reading = read_scip(scip_file, root, {p for p, s in store.file_states().items() if not s.skip_reason})
        scip_index_ = fresh(root, cache, "scip")
        merged = graph.apply_precise(scip_index_.store, reading.answers, graph.Resolution.SCIP)
        result["scip_merge_seconds"] = round(time.perf_counter() - started, 2)
        result["scip_documents"] = reading.documents
        result["scip_left_out"] = len(reading.stale) + len(reading.missing)
        result["scip_edges_answered"] = merged.matched
        result["scip_call_coverage"] = round(
            sum(1 for _, how in edges_of(scip_index_).values() if how == graph.Resolution.SCIP) / max(1, calls), 3)
        truth = edges_of(scip_index_)
        result["names"] = score(names, truth)
        result["scip"] = score(truth, truth)
        result["query_p50_ms_merged"] = query_p50s(scip_index_, runs)
        result["query_p50_ms_names"] = query_p50s(names_index, runs)

        if language == "python":
            jedi_index = fresh(root, cache, "jedi")
            answers, run = jedi_answers(root, jedi_index.store.edge_sites(None))
            graph.apply_precise(jedi_index.store, answers, graph.Resolution.JEDI)
            result["jedi"] = score(edges_of(jedi_index), truth)
            result["jedi_seconds"] = round(run.seconds, 1)
            result["jedi_seconds_per_1000_sites"] = round(1000 * run.seconds / run.sites, 1) if run.sites else None
            result["jedi_sites"] = run.sites
            jedi_index.close()
        lsp_index = fresh(root, cache, "lsp")
        servers = [s for s in installed_servers(str(tools())) if s.speaks(language)]
        files = [p for p, s in lsp_index.store.file_states().items() if not s.skip_reason]
        answers, runs = lsp_answers(root, lsp_index.store.edge_sites(None), servers, files)
        graph.apply_precise(lsp_index.store, answers, graph.Resolution.LSP)
        result["lsp"] = score(edges_of(lsp_index), truth)
        for server_name, run in runs.items():
            result["lsp_server"] = server_name
            result["lsp_seconds"] = round(run.seconds, 1)
            result["lsp_seconds_per_1000_sites"] = round(1000 * run.seconds / run.sites, 1) if run.sites else None
            result["lsp_failed"] = run.failed
        lsp_index.close()
        resolutions = Counter(how for _, how in truth.values())
        result["truth_resolutions"] = dict(resolutions.most_common())
        names_index.close()
        scip_index_.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--repos", default=",".join(REPOS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results") / "graph_precision.json")
    args = parser.parse_args()
    results = []
    for name in args.repos.split(","):
        result = bench(name, args.mirrors, args.runs)
        print(json.dumps(result), flush=True)
        results.append(result)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
