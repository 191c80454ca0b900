"""Signal `function`: the file is ranked by its best chunk, the answer is the file's best
definition. Inside a file the chunks keep the order of their own scores (retrieval and the
per-chunk signals, before `folder` and `coherence` lift the file's best one), except that a
chunk of no definition steps back (`anonymous_chunk_factor`): imports, a file's header, the doc
comment and tail between two functions match a question's words without being the code that
does what it asks. Unless it defines a queried name (`module Helpers` opening a long module
answers `Sinatra::Helpers`). The places each file holds in the ranking (where its lifted and
decayed scores put them) stay as they are: the signal changes which chunk fills them, never
which files a page shows or where."""

from __future__ import annotations

from collections.abc import Sequence

from codewhere.search.query import Query
from codewhere.search.ranking.definition import defines_queried
from codewhere.search.ranking.scores import Scores


def place_functions(run: Scores, query: Query, own: Sequence[float], capped: set[int]) -> set[int]:
    """Re-place each file's chunks by `own` (their scores before the file-level signals; a chunk
    of no definition × anonymous_chunk_factor), in the places the file already holds. Returns
    `capped` (the chunks a hard cap puts after every file's first) for the new order."""
    factor = run.p.anonymous_chunk_factor

    def evidence(i: int) -> float:
        row = run.rows[i]
        if row.unit is None and not (query.names and defines_queried(row, query)):
            return own[i] * factor
        return own[i]

    by_file: dict[str, list[int]] = {}
    for i in run.ranked():
        by_file.setdefault(run.rows[i].path, []).append(i)
    placed = set(capped)
    for members in by_file.values():
        if len(members) < 2:
            continue
        place = {i: n for n, i in enumerate(members)}  # ties keep the order the file has
        order = sorted(members, key=lambda i: (-evidence(i), place[i]))
        if order == members:
            continue
        slots = [(run.scores[i], i in capped) for i in members]
        for slot, ((score, is_capped), i) in enumerate(zip(slots, order, strict=True)):
            run.scores[i] = score
            if slot != place[i]:
                run.note(i, "function", slot + 1)
            if is_capped:
                placed.add(i)
            else:
                placed.discard(i)
    return placed
