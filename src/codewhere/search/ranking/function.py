"""Signal `function`: the file is ranked by its best chunk, the answer is the file's best
definition. Inside a file the chunks are ordered by how well each matches the question's words:
its BM25 score (read deeper than fusion reads the keyword list, so most candidates of a file
have one), times its definition's length to a small power (BM25 normalises length away, but of
two functions that hold the words, the longer one more often does the work asked about), times
what the per-chunk signals made of it (a definition of a queried name, a test, a short chunk).
Fused ranks judge a file well and its functions coarsely: a chunk at keyword rank 40 and vector
rank 5 fuses like one at keyword rank 5 and vector rank 40. A chunk of no definition steps back
(`anonymous_chunk_factor`): imports, a file's header, the doc comment and tail between two
functions match a question's words without being the code that does what it asks. Unless it
defines a queried name (`module Helpers` opening a long module answers `Sinatra::Helpers`). A
file none of whose candidates holds a query word keeps the order of its chunks' own scores.
The places each file holds in the ranking (where its lifted and decayed scores put them) stay
as they are: the signal changes which chunk fills them, never which files a page shows or where.
With one exception: when the question's words stand out in one file (its whole-file BM25 well
above every other file's), the question is most likely about one place, and the first file's
second definition, when it matches nearly as well as the first, moves up beside it (a file's
further chunks otherwise step back far behind the other files: right for a question whose
answer spans files, wrong for "which function does this")."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence

from codewhere.search.query import Query
from codewhere.search.ranking.definition import defines_queried
from codewhere.search.ranking.scores import Scores
from codewhere.types import ChunkRow


def place_functions(
    run: Scores, query: Query, own: Sequence[float], fused: Sequence[float], keyword: Mapping[int, float],
    capped: set[int], files: Mapping[tuple[str, str], float], semantic: Mapping[int, int] | None = None,
) -> set[int]:
    """Re-place each file's chunks by their match (above), in the places the file already holds.
    `own`: each chunk's score before the file-level signals; `fused`: its fused score (a chunk
    evidence brought in has none); `keyword`: BM25 scores by chunk id; `files`: whole files'
    BM25 scores, which say whether one file stands out (none when `file-words` is off); `semantic`:
    ranks in the vector list, read deeper than fusion reads it (none unless the set weighs them). Returns `capped` (the chunks a hard cap
    puts after every file's first) for the new order."""
    p = run.p
    semantic = semantic or {}

    def step_back(i: int) -> float:
        row = run.rows[i]
        return p.anonymous_chunk_factor if row.unit is None and not (query.names and defines_queried(row, query)) else 1.0

    def match(i: int) -> float:
        row = run.rows[i]
        gained = own[i] / fused[i] if i < len(fused) and fused[i] else 1.0  # the per-chunk signals' product
        by_words = keyword.get(row.chunk_id, 0.0) * definition_lines(row) ** p.function_length_exponent * gained * step_back(i)
        rank = semantic.get(row.chunk_id)
        if rank is None:
            return by_words
        return by_words * (1.0 + p.function_semantic_weight * p.function_semantic_k / (p.function_semantic_k + rank))

    by_file: dict[str, list[int]] = {}
    for i in run.ranked():
        by_file.setdefault(run.rows[i].path, []).append(i)
    placed = set(capped)
    lift_runner_up = p.function_runner_up > 0 and stands_out(files, p.function_runner_up_when)
    for file_rank, members in enumerate(by_file.values()):
        if len(members) < 2:
            continue
        place = {i: n for n, i in enumerate(members)}  # ties keep the order the file has
        by_words = any(run.rows[i].chunk_id in keyword for i in members)
        if by_words:
            order = sorted(members, key=lambda i: (-match(i), place[i]))
        else:
            order = sorted(members, key=lambda i: (-own[i] * step_back(i), place[i]))
        if order != members:
            slots = [(run.scores[i], i in capped) for i in members]
            for slot, ((score, is_capped), i) in enumerate(zip(slots, order, strict=True)):
                run.scores[i] = score
                if slot != place[i]:
                    run.note(i, "function", slot + 1)
                if is_capped:
                    placed.add(i)
                else:
                    placed.discard(i)
        if file_rank == 0 and lift_runner_up and by_words:
            _lift_runner_up(run, order, placed, match)
    return placed


def stands_out(files: Mapping[tuple[str, str], float], ratio: float) -> bool:
    """Whether the best file's BM25 is the only one or the second best is below `ratio` of it."""
    best = heapq.nlargest(2, files.values())
    return bool(best) and best[0] > 0 and (len(best) < 2 or best[1] < ratio * best[0])


def _lift_runner_up(run: Scores, order: Sequence[int], capped: set[int], match: Callable[[int], float]) -> None:
    """The file's best chunk of another definition than its first's, at least at the first's
    score × `function_runner_up` × its match / the first's (`order`: the file's chunks as placed)."""
    first = order[0]
    best = match(first)
    second = next((i for i in order[1:] if run.rows[i].unit != run.rows[first].unit), None)
    if second is None or second in capped or best <= 0:
        return
    lifted = run.scores[first] * run.p.function_runner_up * match(second) / best
    if lifted > run.scores[second]:
        run.scores[second] = lifted
        run.note(second, "function", 2)


def definition_lines(row: ChunkRow) -> int:
    """The length of the definition the chunk belongs to (a window of a long function: the
    function's), or of the chunk itself."""
    unit = row.unit
    return unit.end_line - unit.start_line + 1 if unit else row.end_line - row.start_line + 1
