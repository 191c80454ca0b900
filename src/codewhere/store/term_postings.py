"""BM25 for a warm reader of an index too big to hold its chunks (the kernel's 1.4 M): each query
term's postings read once from FTS5 itself and kept, then scored in numpy as warm_keywords does.

FTS5 answers a question in words on the kernel in 27-304 ms (the benchmark's 12 questions),
nearly all of it its ranking function called row by row (`"data"` matches 234k chunks). Reading a term's postings costs about
as much once (its fts5vocab rows), after which a question over held terms is a few vector
operations. A search reads a rare term it needs itself (5-20 ms); a question with a common term
not held yet is answered by the store as before, while a thread reads the term. The scores are
FTS5's bm25 over the same rows and lengths, so the lists are the store's
(`tests/test_term_postings.py` compares them).

Everything held belongs to one state of the index: when the store's change token moves, it is
dropped, and the terms it held are read again in the thread.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from codewhere.store.warm_keywords import Postings, best_documents, best_first, fold, length_norm

log = logging.getLogger(__name__)

# Postings held over both tables, most recently asked kept: at 12 bytes each, 240 MB (the
# kernel benchmark's 24 questions hold 3.3 M).
POSTINGS_BUDGET = 20_000_000
# A search reads its unheld terms itself when they occur at most this often in all (about 20 ms on
# the kernel: `temperature` 12k, `i2c` 49k); more common ones are read in a thread meanwhile.
IN_SEARCH_INSTANCES = 50_000


@runtime_checkable
class PostingSource(Protocol):
    """A store whose FTS5 postings and row lengths can be read directly (the SQLite file)."""

    def change_token(self) -> object: ...
    def document_lengths(self, table: str) -> np.ndarray: ...  # by rowid; -1 where no row is
    def term_instances(self, table: str, terms: Sequence[str]) -> dict[str, int]: ...
    def term_postings(self, table: str, terms: Sequence[str], in_search: bool = False) -> dict[str, Postings]: ...
    def file_paths(self, file_ids: Sequence[int]) -> dict[int, str]: ...


class _Lengths:
    """One FTS5 table's rows at one state: how many, and each one's length normalisation."""

    def __init__(self, lengths: np.ndarray) -> None:
        self.rows = int((lengths >= 0).sum())
        self.norm = length_norm(lengths, self.rows)


class HeldTerms:
    """The postings of the terms questions asked, for both keyword tables, at one state of the index."""

    def __init__(self, source: PostingSource, budget: int = POSTINGS_BUDGET) -> None:
        self.source = source
        self.budget = budget
        self.fetched = threading.Event()  # set after each read (tests and benchmarks wait on it)
        self.failed = False  # the postings could not be read (a read-only folder, say): the store answers
        self._token: object = None
        self._tables: dict[str, _Lengths] = {}
        self._terms: OrderedDict[tuple[str, str], Postings] = OrderedDict()  # (table, term), least recently asked first
        self._wanted: dict[str, set[str]] = {}
        self._held = 0
        self._lock = threading.Lock()
        self._reading: threading.Thread | None = None

    def search(self, terms: Sequence[str], weights: tuple[float, float], limit: int) -> list[tuple[int, float]] | None:
        """The store's keyword_search from held postings: (chunk id, score), best first; None as `best`."""
        found = self.best("chunks_fts", terms, weights, limit)
        return None if found is None else best_first(found, limit)

    def file_search(self, terms: Sequence[str], weights: tuple[float, float], limit: int) -> dict[tuple[str, str], float] | None:
        """The store's file_keyword_search from held postings: (repository, path) → score; None as `best`."""
        found = self.best("files_fts", terms, weights, limit)
        if found is None:
            return None
        named = self.source.file_paths([rowid for rowid, _ in found])
        return {("", named[rowid]): score for rowid, score in found if rowid in named}  # no repository name, as the store's

    def idle(self, timeout: float) -> bool:
        """Wait until the thread has read what was asked; False if it still reads after `timeout` s."""
        reading = self._reading
        if reading is not None:
            reading.join(timeout)
        return reading is None or not reading.is_alive()

    def best(self, table: str, terms: Sequence[str], weights: tuple[float, float], limit: int) -> list[tuple[int, float]] | None:
        """(rowid, bm25 score) of the best `limit` rows holding any of the terms, and every row
        tied with the last one kept, unordered; None while a common term is not held (it is read
        in a thread meanwhile) or when the postings cannot be read."""
        if self.failed:
            return None
        token = self.source.change_token()
        folded = list(dict.fromkeys(fold(t) for t in terms))
        with self._lock:
            if token != self._token:
                self._renew(token)
            missing = self._missing(table, folded)
            lengths_held = table in self._tables
        if missing and lengths_held:
            self._read_in_search(table, missing, token)
        with self._lock:
            if token != self._token:
                return None
            missing = self._missing(table, folded)
            if missing:
                self._wanted.setdefault(table, set()).update(missing)
                self._start_reading()
                return None
            lengths = self._tables[table]
            for term in folded:
                self._terms.move_to_end((table, term))
            postings = [self._terms[table, t] for t in folded]
        return best_documents(postings, lengths.rows, lengths.norm, weights, limit)

    def _renew(self, token: object) -> None:
        """The index changed: nothing held belongs to it any more. The terms held are read again
        in the thread (as they are now), so a warm process stays warm through edits."""
        again: dict[str, set[str]] = {}
        for table, term in self._terms:
            again.setdefault(table, set()).add(term)
        self._token, self._tables, self._terms, self._wanted, self._held = token, {}, OrderedDict(), again, 0
        if again:
            self._start_reading()

    def _missing(self, table: str, terms: list[str]) -> list[str]:
        return terms if table not in self._tables else [t for t in terms if (table, t) not in self._terms]

    def _read_in_search(self, table: str, terms: list[str], token: object) -> None:
        """Read rare terms now, rather than answer from the store while a thread reads them."""
        try:
            if sum(self.source.term_instances(table, terms).values()) > IN_SEARCH_INSTANCES:
                return
            found = self.source.term_postings(table, terms, in_search=True)
        except Exception:  # the thread reads them, or fails and says why
            log.debug("could not read %s postings in the search", table, exc_info=True)
            return
        if self.source.change_token() != token:
            return
        with self._lock:
            if self._token == token:
                self._add(table, None, found)

    def _add(self, table: str, lengths: np.ndarray | None, found: dict[str, Postings]) -> None:
        """Hold what was read (under the lock), dropping the least recently asked past the budget."""
        if lengths is not None:
            self._tables[table] = _Lengths(lengths)
        for term, postings in found.items():
            if (before := self._terms.pop((table, term), None)) is not None:
                self._held -= len(before[0])
            self._terms[table, term] = postings
            self._held += len(postings[0])
        while self._held > self.budget and len(self._terms) > 1:
            _, dropped = self._terms.popitem(last=False)
            self._held -= len(dropped[0])

    def _start_reading(self) -> None:
        if self._reading is None or not self._reading.is_alive():
            self._reading = threading.Thread(target=self._read, name="codewhere-terms", daemon=True)
            self._reading.start()

    def _read(self) -> None:
        try:
            while self._read_wanted():
                pass
        except Exception:  # the store still answers: a failure here costs speed, not answers
            log.exception("could not read keyword postings of %s; searches read FTS5 per query", self.source)
            self.failed = True
        self.fetched.set()

    def _read_wanted(self) -> bool:
        """Read what questions asked for; False when nothing is left to read."""
        with self._lock:
            token, wanted = self._token, {table: sorted(terms) for table, terms in self._wanted.items() if terms}
            self._wanted = {}
            tables = set(self._tables)
        if not wanted:
            return False
        read: dict[str, tuple[np.ndarray | None, dict[str, Postings]]] = {}
        for table, terms in wanted.items():
            lengths = None if table in tables else self.source.document_lengths(table)
            read[table] = lengths, self.source.term_postings(table, terms)
        if self.source.change_token() != token:
            return True  # the index changed meanwhile: what was read may mix two states; asked again later
        with self._lock:
            if self._token != token:
                return True
            for table, (lengths, found) in read.items():
                self._add(table, lengths, found)
        self.fetched.set()
        return True

