"""The precise passes of an index run, after name resolution: merge a SCIP file when it is new or
changed, and ask jedi about the Python files it has not seen in their current state.

What each pass did last is kept in the index's meta, so a refresh repeats only what changed:
`SCIP_STAMP` is the SCIP file's size and mtime when it was merged; `JEDI_FILES` maps each Python
file jedi read to its content hash and how many of its edges jedi resolved then (fewer now means
some answers lost their target, and the file is asked again).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from codewhere.graph import PreciseReport, Resolution, apply_precise
from codewhere.precise.jedi_pass import PYTHON_SUFFIXES, jedi_answers
from codewhere.precise.scip import read_scip
from codewhere.store import IndexWriter

log = logging.getLogger(__name__)

SCIP_STAMP = "precise_scip_stamp"
JEDI_FILES = "precise_jedi_files"
SCIP_SUMMARY = "graph_scip"  # a line each for `codewhere status`
JEDI_SUMMARY = "graph_jedi"
HIDDEN_META = frozenset({SCIP_STAMP, JEDI_FILES})


@dataclass
class PreciseOutcome:
    lines: list[str] = field(default_factory=list)  # for the index report
    problems: list[str] = field(default_factory=list)  # SCIP documents left out, one line each


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"


def merge_scip(root: Path, store: IndexWriter, scip_file: Path, force: bool = False) -> PreciseOutcome:
    """Merge the SCIP file unless this exact file (path, size, mtime) was merged last."""
    outcome = PreciseOutcome()
    stamp = _stamp(scip_file) if scip_file.exists() else ""
    if not force and stamp and store.meta().get(SCIP_STAMP) == stamp:
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
    outcome = PreciseOutcome()
    meta = store.meta()
    try:
        seen: dict[str, list[object]] = json.loads(meta.get(JEDI_FILES) or "{}")
    except json.JSONDecodeError:
        seen = {}
    states = {p: s for p, s in store.file_states().items() if p.endswith(PYTHON_SUFFIXES) and not s.skip_reason}
    resolved_now = store.resolution_counts(Resolution.JEDI)
    todo = sorted(p for p, s in states.items()
                  if p not in seen or seen[p][0] != s.hash or resolved_now.get(p, 0) < int(str(seen[p][1])))
    if not todo:
        return outcome
    answers, run = jedi_answers(root, store.edge_sites(todo), on_file)
    merged = apply_precise(store, answers, Resolution.JEDI, todo)
    resolved_now = store.resolution_counts(Resolution.JEDI)
    kept = {p: v for p, v in seen.items() if p in states}
    kept.update({p: [states[p].hash, resolved_now.get(p, 0)] for p in todo})
    with store.transaction():
        store.set_meta({JEDI_FILES: json.dumps(kept, separators=(",", ":")),
                        JEDI_SUMMARY: f"{len(kept)} Python files, {sum(resolved_now.values()):,} edges"})
    per_thousand = 1000 * run.seconds / run.sites if run.sites else 0.0
    files = f"{len(todo)} Python file" + ("s" if len(todo) != 1 else "")
    outcome.lines.append(f"jedi ({files}, {run.seconds:.1f} s, {per_thousand:.1f} s per 1,000 sites): {_said(merged)}")
    return outcome


def _said(merged: PreciseReport) -> str:
    return (f"{merged.matched:,} of {merged.sites:,} edges answered, {merged.resolved:,} to a symbol of the repository, "
            f"{merged.matched - merged.resolved:,} to none (a library, a variable)")
