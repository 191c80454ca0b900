"""The candidates of one ranking with their scores, `why`s and signal notes as parallel lists:
what every signal reads and scales. Only the entries returned become records, once."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from codewhere.search.params import RankingParams
from codewhere.search.query import Query
from codewhere.types import ChunkRow, Ranked

NO_WHY: Mapping[str, object] = MappingProxyType({})
Factor = Callable[[ChunkRow, Query, RankingParams], float]


class Scores:
    def __init__(self, rows: Sequence[ChunkRow], scores: Sequence[float], whys: Sequence[Mapping[str, object]],
                 params: RankingParams) -> None:
        self.p = params
        self.rows = list(rows)
        self.scores = list(scores)
        self.whys = list(whys)
        self.notes: list[dict[str, object] | None] = [None] * len(self.rows)

    def add(self, row: ChunkRow) -> None:
        """A chunk that joins the ranking at score 0 (evidence points at it)."""
        self.rows.append(row)
        self.scores.append(0.0)
        self.whys.append(NO_WHY)
        self.notes.append(None)

    def scale(self, i: int, factor: float, signal: str) -> None:
        if factor != 1.0:
            self.scores[i] = self.scores[i] * factor
            self.note(i, signal, factor)

    def note(self, i: int, signal: str, value: object) -> None:
        notes = self.notes[i]
        if notes is None:
            notes = self.notes[i] = {}
        notes[signal] = value

    def ranked(self) -> list[int]:
        """Indices best score first, ties by chunk id: two stable sorts on C key functions,
        several times faster than one on a (-score, id) tuple built in Python."""
        order = sorted(range(len(self.rows)), key=[c.chunk_id for c in self.rows].__getitem__)
        order.sort(key=self.scores.__getitem__, reverse=True)
        return order

    def entry(self, i: int) -> Ranked:
        """The chunk with its score and, in `why`, each signal's factor to 3 decimals."""
        c, notes, why = self.rows[i], self.notes[i], self.whys[i]
        if notes is not None:
            why = dict(why)
            for signal, value in notes.items():
                why[signal] = round(value, 3) if type(value) is float else value  # factors; evidence notes are lists
        return Ranked(c.chunk_id, self.scores[i], why, c)

    def multiply(self, query: Query, factors: Sequence[tuple[str, Factor]]) -> None:
        """Every chunk's score times the product of the per-chunk factors, each noted by name."""
        if not factors:
            return
        scores, notes, p = self.scores, self.notes, self.p
        for i, c in enumerate(self.rows):
            total = 1.0
            for name, factor in factors:
                f = factor(c, query, p)
                if f != 1.0:
                    total *= f
                    found = notes[i]
                    if found is None:
                        notes[i] = {name: f}
                    else:
                        found[name] = f
            if total != 1.0:
                scores[i] = scores[i] * total
