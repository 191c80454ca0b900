"""Signals `folder` and `coherence`: a file's best chunk is lifted by good candidates around it
(in its folder, in itself), and a file's further chunks step back so one file can't fill the page."""

from __future__ import annotations

from collections import defaultdict

from codewhere.search.query import Query
from codewhere.search.ranking.definition import defines_queried
from codewhere.search.ranking.scores import Scores
from codewhere.search.ranking.words import folder_of


def lift_folders(run: Scores) -> None:
    """Signal `folder`: good candidates from other files of the same folder lift a file's best
    chunk (a question about a subsystem points at the folder that holds it: `Queue/`, `task/`),
    against the best-supported file's folder support, as `coherence` scales its own."""
    best: dict[str, int] = {}  # a file's best chunk: its first in the ranked list
    for i in run.ranked():
        best.setdefault(run.rows[i].path, i)
    folders = {path: folder_of(path) for path in best}
    per_folder: dict[str, float] = defaultdict(float)
    for path, i in best.items():
        per_folder[folders[path]] += run.scores[i]
    support = {path: per_folder[folders[path]] - run.scores[i] for path, i in best.items()}
    most = max(support.values(), default=0.0)
    if most <= 0:
        return
    for path, i in best.items():
        run.scale(i, 1 + run.p.folder_coherence * support[path] / most, "folder")


def cohere(run: Scores, query: Query) -> set[int]:
    """Signal `coherence`: several good chunks in a file lift its best one; a file's further chunks
    step back (`file_repeat_decay` each). For an identifier, only files that define it are lifted
    when any does: the many chunks of a file that uses a name say where it is used, not where it
    lives. Returns the chunks a hard cap (file_repeat_decay 0) puts after every file's kept ones."""
    rows, scores, p = run.rows, run.scores, run.p
    by_file: dict[str, list[int]] = {}
    for i in run.ranked():
        path = rows[i].path
        members = by_file.get(path)
        if members is None:
            by_file[path] = [i]
        else:
            members.append(i)
    # each file's support (its other chunks' score) against the best-supported file's, as semble
    # scales it: the lift doesn't shrink because many weak candidates from other files came along
    support = {path: sum([scores[i] for i in members[1:]]) if len(members) > 1 else 0.0
               for path, members in by_file.items()}
    if query.name_like and query.names:
        # a typed name lives where it is defined: a file that only uses it, however often, has
        # no support when a file among the candidates defines it
        defining = {c.path for c in rows if defines_queried(c, query)}
        if defining:
            support = {path: s if path in defining else 0.0 for path, s in support.items()}
    most = max(support.values(), default=0.0) or 1.0
    capped: set[int] = set()
    for path, members in by_file.items():
        run.scale(members[0], 1 + p.coherence * support[path] / most, "coherence")
        if len(members) > p.max_per_file:
            for rank, i in enumerate(members[p.max_per_file:], start=1):
                if p.file_repeat_decay <= 0:
                    capped.add(i)
                else:
                    run.scale(i, p.file_repeat_decay ** rank, "coherence")
    return capped
