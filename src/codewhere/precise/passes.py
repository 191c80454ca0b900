"""The precise passes of an index run, after name resolution: merge a SCIP file when it is new or
changed; ask jedi and the language servers about the files they have not seen as they are now.

What each pass did last is kept in the index's meta, so a refresh repeats only what changed:
`SCIP_STAMP` is the SCIP file's size and mtime when it was merged; `JEDI_FILES` and `LSP_FILES`
map each file jedi or the language servers read to its content hash and how many of its edges
they resolved then (fewer now means some answers lost their target: the file is asked again).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from codewhere.graph import PreciseAnswer, PreciseReport, Resolution, apply_precise
from codewhere.precise import JEDI_FILES, LSP_FILES, SCIP_STAMP
from codewhere.precise.jedi_pass import PYTHON_SUFFIXES, jedi_answers
from codewhere.precise.lsp import Server, installed_servers, lsp_answers
from codewhere.precise.scip import read_scip
from codewhere.precise.sites import PassRun
from codewhere.store import IndexWriter

log = logging.getLogger(__name__)

SCIP_SUMMARY = "graph_scip"  # a line each for `codewhere status`
JEDI_SUMMARY = "graph_jedi"
LSP_SUMMARY = "graph_lsp"


@dataclass
class PreciseOutcome:
    lines: list[str] = field(default_factory=list)  # for the index report
    problems: list[str] = field(default_factory=list)  # SCIP documents left out, one line each


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"


def merge_scip(root: Path, store: IndexWriter, scip_file: Path) -> PreciseOutcome:
    """Merge the SCIP file unless this exact file (path, size, mtime) was merged last."""
    outcome = PreciseOutcome()
    stamp = _stamp(scip_file) if scip_file.exists() else ""
    if stamp and store.meta().get(SCIP_STAMP) == stamp:
        return outcome
    reading = read_scip(scip_file, root, {p for p, s in store.file_states().items() if not s.skip_reason})
    merged = apply_precise(store, reading.answers, Resolution.SCIP)
    outcome.problems = reading.problems()
    outcome.lines.append(
        f"SCIP ({reading.tool or 'unknown indexer'}, {reading.documents} documents): {_said(merged)}"
        + (f"; {len(outcome.problems)} documents left out (stale or not indexed)" if outcome.problems else "")
    )
    with store.transaction():
        store.set_meta({SCIP_STAMP: stamp, SCIP_SUMMARY: f"{scip_file} ({reading.tool}): {merged.matched:,} edges"})
    return outcome


def run_jedi(root: Path, store: IndexWriter, on_file: Callable[[int, int, str], None] | None = None) -> PreciseOutcome:
    """Ask jedi about the Python files that changed since it last read them."""
    def ask(todo: list[str], indexed: list[str]) -> tuple[list[PreciseAnswer], dict[str, PassRun]]:
        answers, run = jedi_answers(root, store.edge_sites(todo), on_file)
        return answers, {"jedi": run}

    return _per_file(store, Resolution.JEDI, PYTHON_SUFFIXES, JEDI_FILES, JEDI_SUMMARY, ask)


def run_lsp(
    root: Path, store: IndexWriter, servers: list[Server] | None = None,
    on_file: Callable[[int, int, str], None] | None = None,
) -> PreciseOutcome:
    """Ask the installed language servers about the files that changed since they last did."""
    servers = installed_servers() if servers is None else servers
    if not servers:
        return PreciseOutcome(["LSP: no language server installed (pyright-langserver, typescript-language-server, "
                               "clangd); the graph keeps name resolution"])
    suffixes = tuple(s for server in servers for s in server.suffixes)

    def ask(todo: list[str], indexed: list[str]) -> tuple[list[PreciseAnswer], dict[str, PassRun]]:
        return lsp_answers(root, store.edge_sites(todo), servers, indexed, on_file)

    return _per_file(store, Resolution.LSP, suffixes, LSP_FILES, LSP_SUMMARY, ask)


def _per_file(
    store: IndexWriter, how: str, suffixes: tuple[str, ...], meta_key: str, summary_key: str,
    ask: Callable[[list[str], list[str]], tuple[list[PreciseAnswer], dict[str, PassRun]]],
) -> PreciseOutcome:
    """Ask about the files of `suffixes` that changed since the last pass (or lost answers), merge
    the answers as `how`, and record what was asked."""
    outcome = PreciseOutcome()
    try:
        seen: dict[str, list[object]] = json.loads(store.meta().get(meta_key) or "{}")
    except json.JSONDecodeError:
        seen = {}
    indexed_states = {p: s for p, s in store.file_states().items() if not s.skip_reason}  # read once: `ask` gets the list too
    indexed = list(indexed_states)
    states = {p: s for p, s in indexed_states.items() if p.endswith(suffixes)}
    resolved_now = store.resolution_counts(how)
    todo = sorted(p for p, s in states.items()
                  if p not in seen or seen[p][0] != s.hash or resolved_now.get(p, 0) < int(str(seen[p][1])))
    if not todo:
        return outcome
    answers, runs = ask(todo, indexed)
    merged = apply_precise(store, answers, how, todo)
    resolved_now = store.resolution_counts(how)
    failed = {name for name, run in runs.items() if run.failed}
    kept = {p: v for p, v in seen.items() if p in states}
    if not failed:  # after a failure nothing is recorded: the next run asks again
        kept.update({p: [states[p].hash, resolved_now.get(p, 0)] for p in todo})
    with store.transaction():
        store.set_meta({meta_key: json.dumps(kept, separators=(",", ":")),
                        summary_key: f"{len(kept)} files, {sum(resolved_now.values()):,} edges"})
    for name, run in runs.items():
        files = f"{run.files} file" + ("s" if run.files != 1 else "")
        per_thousand = 1000 * run.seconds / run.sites if run.sites else 0.0
        outcome.lines.append(f"{name} ({files}, {run.seconds:.1f} s, {per_thousand:.1f} s per 1,000 sites)"
                             + (f": stopped early, {run.failed}" if run.failed else ""))
    outcome.lines.append(f"{how}: {_said(merged)}")
    return outcome


def _said(merged: PreciseReport) -> str:
    return (f"{merged.matched:,} of {merged.sites:,} edges answered, {merged.resolved:,} to a symbol of the repository, "
            f"{merged.matched - merged.resolved:,} to none (a library, a variable)")
