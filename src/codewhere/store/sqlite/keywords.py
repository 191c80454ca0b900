"""Keyword search: FTS5's bm25, the kept postings of a large index, and FTS5's postings for a
warm reader."""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import apsw
import numpy as np

from codewhere.errors import (
    QueryError,
)
from codewhere.store import kept_postings
from codewhere.store.sqlite import schema
from codewhere.store.sqlite.schema import (
    _FTS_TABLES,
    _KEPT_SCHEMA,
    BUSY_TIMEOUT_MS,
    IN_SEARCH,
    IN_THREAD,
    KEPT_PARTS,
    KEPT_THROUGH,
    _apsw_errors_mapped,
    _fts_table,
    _varint_sum,
    fts5_expression,
)
from codewhere.store.sqlite.tier_vectors import TierVectors
from codewhere.store.warm_keywords import Postings, best_documents, best_first, fold, length_norm
from codewhere.types import (
    Filters,
    TermQuery,
)

log = logging.getLogger(__name__)


@_apsw_errors_mapped
class Keywords(TierVectors):
    """Keyword search: FTS5's bm25, the kept postings of a large index, and FTS5's postings for a
    warm reader."""

    def _move_keywords_if_due(self) -> None:
        """At a commit: move FTS5's rows to the kept postings once FOLD_CHUNKS chunks were written
        since the last move (at once when the index has just turned compact), in an index that is
        compact, moved before, or is a large first build (`expect_files`)."""
        through = self._kept_through()
        if not (through or self._pending is not None or self._compact()):
            return  # an index that never moved: FTS5 alone (every small one)
        last = int(self._db.execute("SELECT coalesce(max(id), 0) FROM chunks").get)
        if last - through >= schema.FOLD_CHUNKS or (self._turned_compact and last > through):
            self._move_keywords(last)

    def _move_keywords(self, last: int) -> None:
        """Every FTS5 row (chunk ids up to `last`) into the kept postings as one new part of each
        term, their lengths into the kept lengths; FTS5 is left empty."""
        self._db.execute(_KEPT_SCHEMA)
        part = int(self.meta().get(KEPT_PARTS, "0"))
        if self._pending is not None:
            moving, names = self._pending.moving(), self._pending.term_names()
            terms, blobs = kept_postings.encode_by_term(moving.term, moving.docs, moving.in_path, moving.in_text)
            encoded = {names[t]: b for t, b in zip(terms.tolist(), blobs, strict=True)}
            chunks, chunk_lengths = moving.chunks, moving.chunk_lengths
            files, file_lengths = moving.files, moving.file_lengths
        else:
            encoded = self._fts_postings("chunks_fts")
            chunks, chunk_lengths = self._fts_lengths(self._db, "chunks_fts")
            files, file_lengths = self._fts_lengths(self._db, "files_fts")
        self._set_kept_lengths(0, chunks, chunk_lengths)
        self._set_kept_lengths(1, files, file_lengths)
        for table in _FTS_TABLES:
            self._db.execute(f"INSERT INTO {table}({table}) VALUES('delete-all')")
        self._db.executemany("INSERT INTO kept_postings(part, term, docs) VALUES(?, ?, ?)",
                             [(part, term, encoded[term]) for term in sorted(encoded)])
        self.set_meta({KEPT_THROUGH: str(last), KEPT_PARTS: str(part + 1)})
        self._pending = kept_postings.Pending()

    def _fts_postings(self, table: str) -> dict[str, bytes]:
        """FTS5's rows of a keyword table as kept postings, read back from its token positions a
        slice of terms at a time."""
        self._db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_moving USING fts5vocab(main, {table}, instance)")
        cursor = self._db.execute(
            f"""SELECT term, count(*), group_concat(printf('%08x%08x%08x', doc, in_path, n - in_path), '') FROM (
                  SELECT term, doc, sum(col = 'path') AS in_path, count(*) AS n FROM temp.{table}_moving GROUP BY term, doc)
                GROUP BY term""")  # noqa: S608 — our table names
        out: dict[str, bytes] = {}
        while rows := list(itertools.islice(cursor, 50_000)):
            docs, in_path, in_text = kept_postings.from_hex_rows([cast(str, r[2]) for r in rows])
            term_of = np.repeat(np.arange(len(rows)), [cast(int, r[1]) for r in rows])
            terms, blobs = kept_postings.encode_by_term(term_of, docs, in_path, in_text)
            out.update((cast(str, rows[t][0]), b) for t, b in zip(terms.tolist(), blobs, strict=True))
        self._db.execute(f"DROP TABLE temp.{table}_moving")
        return out

    @staticmethod
    def _fts_lengths(db: apsw.Connection, table: str) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, length in tokens over the columns) of an FTS5 table's rows, from its docsize rows."""
        rows = db.execute(f"SELECT id, sz FROM {_fts_table(table)}_docsize").fetchall()
        docs = np.fromiter((cast(int, r[0]) for r in rows), np.int64, len(rows))
        sizes = [cast(bytes, r[1]) for r in rows]
        joined = b"".join(sizes)
        if joined.isascii() and all(sizes):  # one byte per column, the common case: summed at once
            starts = np.concatenate(([0], np.cumsum([len(b) for b in sizes])[:-1]))
            return docs, np.add.reduceat(np.frombuffer(joined, np.uint8).astype(np.int64), starts) if len(rows) else docs
        return docs, np.fromiter(map(_varint_sum, sizes), np.int64, len(rows))

    def _set_kept_lengths(self, tab: int, docs: np.ndarray, lengths: np.ndarray) -> None:
        pages = np.asarray(docs, np.int64) // kept_postings.LENGTH_PAGE
        for page in np.unique(pages).tolist():
            row = self._db.execute("SELECT lengths FROM kept_lengths WHERE tab = ? AND page = ?", (tab, page)).fetchone()
            blob = cast(bytes, row[0]) if row else None
            on_page = pages == page
            if tab == 0:
                held = kept_postings.dense_page(blob)
                held[docs[on_page] % kept_postings.LENGTH_PAGE] = lengths[on_page]
                written = held.tobytes()
            else:
                written = kept_postings.sparse_blob(*kept_postings.merged(*kept_postings.sparse_page(blob),
                                                                          docs[on_page], lengths[on_page]))
            self._db.execute("INSERT OR REPLACE INTO kept_lengths(tab, page, lengths) VALUES(?, ?, ?)", (tab, page, written))

    def _forget_kept(self, tab: int, docs: Sequence[int]) -> None:
        """Documents deleted after they moved: their postings stay, their length says they are gone."""
        ids = np.asarray(docs, np.int64)
        self._set_kept_lengths(tab, ids, np.full(len(ids), -1, np.int64))

    def _document_lengths(self, db: apsw.Connection, table: str) -> np.ndarray:
        """Each document's length in tokens, by id, -1 where none is: the kept ones and FTS5's."""
        return self._lengths_and_kept_files(db, table)[0]

    def _lengths_and_kept_files(self, db: apsw.Connection, table: str) -> tuple[np.ndarray, np.ndarray | None]:
        """`_document_lengths`, and for `files_fts` the first chunk id of every file moved (which
        `_term_postings` maps kept chunk postings to files by): read once for both."""
        docs, lengths = self._fts_lengths(db, table)
        kept_files = None
        if _fts_table(table) == "chunks_fts":
            kept = self._kept_chunk_lengths(db)
        else:
            kept_files, kept_lengths = self._kept_file_lengths(db)
            kept = np.full(int(kept_files[-1]) + 1 if len(kept_files) else 0, -1, np.int64)
            kept[kept_files] = kept_lengths
        out = np.full(max(len(kept), int(docs.max()) + 1 if len(docs) else 0), -1, np.int64)
        out[: len(kept)] = kept
        out[docs] = lengths
        return out, kept_files

    @staticmethod
    def _kept_chunk_lengths(db: apsw.Connection) -> np.ndarray:
        if not Keywords._kept_through_of(db):
            return np.empty(0, np.int64)
        pages = [(cast(int, page), cast(bytes, blob)) for page, blob in db.execute(
            "SELECT page, lengths FROM kept_lengths WHERE tab = 0 ORDER BY page")]
        out = np.full((pages[-1][0] + 1) * kept_postings.LENGTH_PAGE if pages else 0, -1, np.int64)
        for page, blob in pages:
            out[page * kept_postings.LENGTH_PAGE:(page + 1) * kept_postings.LENGTH_PAGE] = kept_postings.dense_page(blob)
        return out

    @staticmethod
    def _kept_file_lengths(db: apsw.Connection) -> tuple[np.ndarray, np.ndarray]:
        """(first chunk id, length) of every file moved, gone ones too (length -1), by id."""
        if not Keywords._kept_through_of(db):
            return np.empty(0, np.int64), np.empty(0, np.int32)
        pages = [kept_postings.sparse_page(cast(bytes, blob)) for (blob,) in db.execute(
            "SELECT lengths FROM kept_lengths WHERE tab = 1 ORDER BY page")]
        if not pages:
            return np.empty(0, np.int64), np.empty(0, np.int32)
        return np.concatenate([d for d, _ in pages]), np.concatenate([n for _, n in pages])

    @staticmethod
    def _kept_parts_of(db: apsw.Connection) -> str:
        """The kept parts' numbers, as an SQL list."""
        row = db.execute("SELECT value FROM meta WHERE key = ?", (KEPT_PARTS,)).fetchone()
        return ",".join(str(p) for p in range(int(row[0]) if row else 0)) or "NULL"

    def _term_postings(self, db: apsw.Connection, table: str, terms: Sequence[str],
                       lengths: tuple[np.ndarray, np.ndarray | None] | None) -> dict[str, Postings]:
        """Term → (documents, count in the path, count in the rest) as FTS5 would hold them: the
        kept ones still standing and FTS5's own. `lengths`: what `_lengths_and_kept_files` read
        (which documents stand, and which chunk ids start the files moved); None: FTS5's only."""
        kept = lengths is not None and self._kept_through_of(db) > 0
        parts = self._kept_parts_of(db)
        file_docs = lengths[1] if kept and lengths is not None and _fts_table(table) == "files_fts" else None
        found: dict[str, Postings] = {}
        for term in terms:
            rows = db.execute(f"SELECT doc, sum(col = 'path'), count(*) FROM temp.{table}_instances "
                              "WHERE term = ? GROUP BY doc", (term,)).fetchall()
            held = np.array(rows, np.int64).reshape(len(rows), 3)
            docs, in_path, in_text = held[:, 0], held[:, 1].astype(np.float32), (held[:, 2] - held[:, 1]).astype(np.float32)
            if kept and lengths is not None:
                blobs = [cast(bytes, b) for (b,) in db.execute(
                    f"SELECT docs FROM kept_postings WHERE part IN ({parts}) AND term = ? ORDER BY part", (term,))]
                k_docs, k_path, k_text = kept_postings.decode(blobs)
                if file_docs is not None:
                    k_docs, k_path, k_text = kept_postings.per_file(k_docs, k_path, k_text, file_docs)
                alive = kept_postings.live(k_docs, lengths[0])
                docs = np.concatenate([k_docs[alive], docs])
                in_path = np.concatenate([k_path[alive], in_path])
                in_text = np.concatenate([k_text[alive], in_text])
            found[term] = docs, in_path, in_text
        return found

    def _vocabulary(self, db: apsw.Connection) -> None:
        """fts5vocab tables over both keyword tables on this connection (its temp schema)."""
        for table in _FTS_TABLES:
            for kind in ("row", "instance"):
                db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_{kind}s USING fts5vocab(main, {table}, {kind})")

    def _kept_best(self, table: str, query: TermQuery, limit: int, filters: Filters) -> list[tuple[int, float]]:
        """(document, bm25 score) of the best `limit` documents, best first (ties by id), over the
        kept postings and FTS5's together: what FTS5 alone answers for an index that never moved."""
        self._vocabulary(self._db)
        read = self._lengths_and_kept_files(self._db, table)
        lengths = read[0]
        terms = list(dict.fromkeys(fold(t) for t in query.terms))
        postings = list(self._term_postings(self._db, table, terms, read).values())
        allowed = None  # which documents may be answered; each term's weight counts every document holding it
        if query.match != "any" and postings:  # "all" (and a phrase, which needs positions: read as "all")
            allowed = functools.reduce(np.intersect1d, [p[0] for p in postings])
        where, params = self._filter(filters)
        if where:
            doc = "c.id" if table == "chunks_fts" else "min(c.id)"
            grouped = "" if table == "chunks_fts" else " GROUP BY c.file_id"
            permitted = np.fromiter((cast(int, r[0]) for r in self._db.execute(
                f"SELECT {doc} FROM chunks c JOIN files f ON f.id = c.file_id WHERE 1{where}{grouped}", params)), np.int64)
            allowed = permitted if allowed is None else np.intersect1d(allowed, permitted)
        rows = int((lengths >= 0).sum())
        found = best_documents(postings, rows, length_norm(lengths, rows), query.field_weights, limit, allowed)
        return best_first(found, limit)

    # ---- reading -------------------------------------------------------------------------

    def keyword_search(self, query: TermQuery, limit: int, filters: Filters) -> list[tuple[int, float]]:
        """(chunk id, BM25 score, higher is better) of the chunks matching the terms."""
        if self._kept_through():
            return self._kept_best("chunks_fts", query, limit, filters)
        rows = self._bm25(query, limit, filters, """SELECT c.id, bm25(chunks_fts, ?, ?) AS score
                  FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid JOIN files f ON f.id = c.file_id
                  WHERE chunks_fts MATCH ?{where} ORDER BY score LIMIT ?""",
            # no filter: the join would run for every match (thousands for a question in words), not only the kept
            "SELECT rowid, bm25(chunks_fts, ?, ?) AS score FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY score LIMIT ?")
        return [(int(i), -float(s)) for i, s in cast(list[tuple[int, float]], rows)]

    def file_keyword_search(self, query: TermQuery, limit: int, filters: Filters) -> dict[tuple[str, str], float]:
        """(repository, path) → BM25 score (higher is better) of the best `limit` files, each
        file scored as one document: its path and all its chunks."""
        if self._kept_through():
            found = self._kept_best("files_fts", query, limit, filters)
            paths = self._file_paths(self._db, [doc for doc, _ in found])
            return {("", paths[doc]): score for doc, score in found if doc in paths}
        rows = self._bm25(query, limit, filters, """SELECT f.path, bm25(files_fts, ?, ?) AS score
                  FROM files_fts JOIN chunks c ON c.id = files_fts.rowid JOIN files f ON f.id = c.file_id
                  WHERE files_fts MATCH ?{where} ORDER BY score LIMIT ?""",
            """SELECT f.path, s.score FROM (SELECT rowid, bm25(files_fts, ?, ?) AS score FROM files_fts
               WHERE files_fts MATCH ? ORDER BY score LIMIT ?) s JOIN chunks c ON c.id = s.rowid
               JOIN files f ON f.id = c.file_id""")  # the join for the kept only
        return {("", str(path)): -float(score) for path, score in cast(list[tuple[str, float]], rows)}  # no repository name, as in its rows

    def _bm25(self, query: TermQuery, limit: int, filters: Filters, filtered: str, unfiltered: str) -> list[Any]:
        """The rows of an FTS5 query: `filtered` (its `{where}` takes the filter's clauses) when
        filters apply, else `unfiltered`; each takes the field weights, the match and the limit."""
        match = fts5_expression(query)
        where, params = self._filter(filters)
        sql = filtered.format(where=where) if where else unfiltered
        try:
            return self._db.execute(sql, (*query.field_weights, match, *params, limit)).fetchall()
        except apsw.SQLError as exc:
            raise QueryError(f"the keyword query could not run ({exc})", "remove unusual punctuation from the query") from exc

    # ---- FTS5's postings, for a warm reader of an index too big to hold (store/term_postings.py) --

    @contextmanager
    def _postings(self, slot: int) -> Iterator[apsw.Connection]:
        """A read-only connection of its own (IN_THREAD or IN_SEARCH), one read at a time, in one snapshot."""
        with self._postings_use[slot]:
            db = self._postings_dbs[slot]
            if db is None:
                db = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READONLY)
                db.setbusytimeout(BUSY_TIMEOUT_MS)
                self._vocabulary(db)
                self._postings_dbs[slot] = db
            with db:
                yield db

    def document_lengths(self, table: str) -> np.ndarray:
        """Each row's length in tokens over its columns, indexed by rowid, -1 where no row is:
        what FTS5's bm25 divides by (the kept postings' documents with FTS5's)."""
        with self._postings(IN_THREAD) as db:
            return self._document_lengths(db, table)

    def term_instances(self, table: str, terms: Sequence[str]) -> dict[str, int]:
        """What reading each term's postings costs, in FTS5 instance rows: those it holds, and a
        tenth of a posting (about two bytes) for each kept one (varints to decode, not rows to step through)."""
        with self._postings(IN_SEARCH) as db:
            kept = self._kept_through_of(db) > 0
            parts = self._kept_parts_of(db)
            return {term: int(db.execute(f"SELECT coalesce(sum(cnt), 0) FROM temp.{_fts_table(table)}_rows WHERE term = ?",
                                         (term,)).get)
                    + (int(db.execute(f"SELECT coalesce(sum(length(docs)), 0) FROM kept_postings "
                                      f"WHERE part IN ({parts}) AND term = ?", (term,)).get) // 20 if kept else 0)
                    for term in terms}

    def term_postings(self, table: str, terms: Sequence[str], in_search: bool = False) -> dict[str, Postings]:
        """Term → (rowids, count in the path column, count in the others) of each term as FTS5
        stores it (folded), read in one snapshot; a term no row holds has empty arrays."""
        with self._postings(IN_SEARCH if in_search else IN_THREAD) as db:
            moved = self._lengths_and_kept_files(db, table) if self._kept_through_of(db) else None
            return self._term_postings(db, table, terms, moved)

    def file_paths(self, file_ids: Sequence[int]) -> dict[int, str]:
        """Path of each `files_fts` row (its file's first chunk id)."""
        return self._file_paths(self._db, file_ids)

    @staticmethod
    def _file_paths(db: apsw.Connection, docs: Sequence[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for part in (docs[i : i + 500] for i in range(0, len(docs), 500)):
            found.update((int(i), str(p)) for i, p in db.execute(
                f"SELECT c.id, f.path FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN ({','.join('?' * len(part))})",
                tuple(part)))
        return found

