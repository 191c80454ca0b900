"""Writing files, their chunks, symbols and edges (an IndexWriter's part of the store)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import cast

from codewhere.store import kept_postings
from codewhere.store.base import (
    FileStamp,
    FileState,
    definition_rows,
    grouped,
    path_bounds,
    smallest_chunk_by_line,
    unit_columns,
)
from codewhere.store.sqlite import schema
from codewhere.store.sqlite.keywords import Keywords
from codewhere.store.sqlite.schema import (
    EDGE_KIND_CODES,
    KEPT_PARTS,
    KEPT_THROUGH,
    _apsw_errors_mapped,
    _hash_key,
    _hash_text,
    _stored_text,
)
from codewhere.types import (
    Chunk,
    Edge,
    FileRecord,
    SkipReason,
    Symbol,
    SymbolRef,
)

log = logging.getLogger(__name__)


@_apsw_errors_mapped
class Writer(Keywords):
    """Writing files, their chunks, symbols and edges (an IndexWriter's part of the store)."""

    # ---- writing files and chunks (call inside transaction()) ----------------------------

    def file_states(self, under: Sequence[str] | None = None) -> dict[str, FileState]:
        """Every file's state, or (with `under`) those of these paths and of files below them."""
        sql = "SELECT path, size, mtime_ns, hash, skip_reason FROM files"
        if under is None:
            rows = list(self._db.execute(sql))
        else:
            where = " WHERE path = ? OR (path > ? AND path < ?)"
            rows = [row for path in under for row in self._db.execute(sql + where, path_bounds(path))]
        return {path: FileState(size, mtime, h, skip) for path, size, mtime, h, skip in rows}

    def file_stamps(self) -> list[FileStamp]:
        """Every file's size and mtime, and skip reason: half the time of `file_states` (78k files)."""
        return cast(list[FileStamp], self._db.execute("SELECT path, size, mtime_ns, skip_reason FROM files").fetchall())

    def content_hashes_in(self, paths: Sequence[str]) -> set[str]:
        """The chunk texts of these files (before they are replaced: their vectors may become orphans)."""
        return {_hash_text(h) for (h,) in self._db.execute(
            "SELECT DISTINCT c.content_hash FROM chunks c JOIN files f ON f.id = c.file_id JOIN json_each(?) j ON f.path = j.value",
            (json.dumps(list(paths)),),
        )}

    def symbols_in(self, paths: Sequence[str]) -> list[SymbolRef]:
        """The symbols these files define (before and after they are rewritten: resolution
        compares the two, see graph.carried_over)."""
        return [SymbolRef(*r) for r in self._db.execute(
            """SELECT s.id, s.file_id, s.name, s.kind, s.parent FROM symbols s JOIN files f ON f.id = s.file_id
               JOIN json_each(?) j ON f.path = j.value""",
            (json.dumps(list(paths)),),
        )]

    def move_edge_targets(self, moves: Sequence[tuple[int, int]]) -> None:
        """Point the edges into each old symbol id at its new id."""
        self._db.executemany("UPDATE edge_rows SET target_id = ? WHERE target_id = ?", [(new, old) for old, new in moves])
    def _write_file_row(self, record: FileRecord, digest: str | None, skip: SkipReason | None) -> int:
        """The file's row id, its row written and, for a path the index had, everything derived
        from its old content deleted. A new path takes a plain INSERT and no DELETE: a statement
        that may write several rows (an upsert, a DELETE) opens a savepoint, and at each savepoint
        FTS5 writes out the keyword rows it holds as a new segment. Once per file, that was 0.2 ms
        a file on gson and a pile of small segments to merge; now a build's rows go out when its
        transaction commits."""
        values = (record.size, record.mtime_ns, digest, record.kind.value, record.language, skip.value if skip else None)
        known = self._db.execute("SELECT id FROM files WHERE path = ?", (record.path,)).fetchone()
        if known is None:
            self._db.execute("""INSERT INTO files(path, size, mtime_ns, hash, kind, language, skip_reason)
                                VALUES(?, ?, ?, ?, ?, ?, ?)""", (record.path, *values))
            return self._db.last_insert_rowid()
        file_id = int(known[0])
        self._db.execute("UPDATE files SET size=?, mtime_ns=?, hash=?, kind=?, language=?, skip_reason=? WHERE id = ?",
                         (*values, file_id))
        if self._holds_content(file_id):  # not deleted ahead with its batch (forget_contents)
            self._delete_contents([file_id])
        return file_id

    def forget_contents(self, paths: Sequence[str]) -> None:
        """Delete what the index derived from these paths' old content, for all of them at once,
        ahead of writing their new content in this transaction. Deleted a file at a time, each
        DELETE opened a savepoint at which FTS5 wrote out the keyword rows it held: a segment per
        changed file on a branch switch."""
        self._delete_contents(self._file_ids(paths))

    def _holds_content(self, file_id: int) -> bool:
        """Whether anything derived from the file's content is stored (reads open no savepoint)."""
        return bool(self._db.execute(
            """SELECT EXISTS(SELECT 1 FROM chunks WHERE file_id = ?1) OR EXISTS(SELECT 1 FROM symbols WHERE file_id = ?1)
                      OR EXISTS(SELECT 1 FROM edge_rows WHERE file_id = ?1)""", (file_id,)).get)

    def _file_ids(self, paths: Iterable[str]) -> list[int]:
        """The row ids of those of these paths the index has."""
        return [cast(int, i) for (i,) in self._db.execute(
            "SELECT id FROM files WHERE path IN (SELECT value FROM json_each(?))", (json.dumps(list(paths)),))]

    def _delete_contents(self, file_ids: Sequence[int]) -> None:
        """Everything derived from these files' content: chunks, symbols, edges and their keyword
        rows (in FTS5, or marked gone in the kept postings when they moved there)."""
        if not file_ids:
            return
        files = json.dumps(list(file_ids))
        through = self._kept_through()
        if through or self._pending is not None:
            rows = self._db.execute(
                "SELECT file_id, id FROM chunks WHERE file_id IN (SELECT value FROM json_each(?)) ORDER BY file_id, id",
                (files,))
            for ids in grouped(rows).values():
                moved = [i for i in ids if i <= through]
                if moved:
                    self._forget_kept(0, moved)
                    if moved[0] == ids[0]:
                        self._forget_kept(1, moved[:1])
                if self._pending is not None:
                    self._pending.drop(ids[0])
        self._db.execute(
            """DELETE FROM files_fts WHERE rowid IN (SELECT min(id) FROM chunks WHERE file_id IN (SELECT value FROM json_each(?))
               GROUP BY file_id) AND rowid > ?""", (files, through))
        self._db.execute(
            """DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE file_id IN (SELECT value FROM json_each(?))
               AND id > ?)""", (files, through))
        self._db.execute("DELETE FROM chunks WHERE file_id IN (SELECT value FROM json_each(?))", (files,))
        self._db.execute(
            "DELETE FROM symbols_fts WHERE rowid IN (SELECT id FROM symbols WHERE file_id IN (SELECT value FROM json_each(?)))",
            (files,))
        self._db.execute("DELETE FROM edge_rows WHERE file_id IN (SELECT value FROM json_each(?))", (files,))
        self._db.execute("DELETE FROM symbols WHERE file_id IN (SELECT value FROM json_each(?))", (files,))

    def replace_file(
        self,
        record: FileRecord,
        digest: str,
        chunks: Sequence[Chunk],
        fts_rows: Sequence[tuple[str, str]],
        symbols: Sequence[Symbol] = (),
        symbol_fts_rows: Sequence[tuple[str, str, str]] = (),
        edges: Sequence[Edge] = (),
        text_at: Sequence[int] | None = None,
    ) -> list[int]:
        """Store a file with its chunks, symbols and edges, replacing what the index had for that path.

        `fts_rows` holds each chunk's (path tokens, body tokens) for the keyword index,
        `symbol_fts_rows` each symbol's (name, split name, qualified name tokens), `text_at`
        where each chunk's text starts in the file's text (-1: not a slice of it).
        """
        self._tier_stale_unless_covered([c.content_hash for c in chunks if c.embed])
        if self._pending is None and self._kept_through() \
                and not self._db.execute("SELECT 1 FROM chunks_fts_docsize LIMIT 1").fetchone():
            self._pending = kept_postings.Pending()  # nothing in FTS5 since the last move: hold from here
        file_id = self._write_file_row(record, digest, None)
        # ids given here (what SQLite would pick: one past the largest) so that each table takes
        # all of a file's rows in one executemany instead of a statement per row
        ids = self._next_ids("chunks", len(chunks))
        compact = self._compact()
        cut_at = list(text_at) if compact and self.sources is not None and text_at is not None else [-1] * len(chunks)
        self._db.executemany(
            """INSERT INTO chunks(id, file_id, start_line, end_line, content_hash, text, text_at, text_len, embed_text,
                                  mentions, unit_start, unit_end, unit_name)
               VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            [(chunk_id, file_id, chunk.start_line, chunk.end_line, _hash_key(chunk.content_hash),
              *_stored_text(chunk.text, at, compact),
              chunk.embed_text if chunk.embed else None, " ".join(chunk.mentions) or None, *unit_columns(chunk.unit))
             for chunk_id, chunk, at in zip(ids, chunks, cut_at, strict=True)],
        )
        self._db.executemany(
            "INSERT INTO chunks_fts(rowid, path, body) VALUES(?, ?, ?)",
            [(chunk_id, path_tokens, body_tokens) for chunk_id, (path_tokens, body_tokens) in zip(ids, fts_rows, strict=True)],
        )
        if fts_rows:
            self._db.execute("INSERT INTO files_fts(rowid, path, body) VALUES(?, ?, ?)",
                             (ids[0], fts_rows[0][0], " ".join(body for _, body in fts_rows)))
        if self._pending is not None:
            self._pending.add(ids, fts_rows)
        self._db.executemany(
            "INSERT INTO definitions(chunk_id, name, spelled) VALUES(?, ?, ?)",
            [(chunk_id, key, spelled) for chunk_id, chunk in zip(ids, chunks, strict=True)
             for key, spelled in definition_rows(chunk.defines)],
        )
        chunk_of = smallest_chunk_by_line([(cid, c.start_line, c.end_line) for cid, c in zip(ids, chunks, strict=True)])
        symbol_rows = self._next_ids("symbols", len(symbols))
        symbol_ids: dict[str, int] = {}
        for symbol_id, symbol in zip(symbol_rows, symbols, strict=True):
            symbol_ids.setdefault(symbol.qualified_name, symbol_id)
        self._db.executemany(
            """INSERT INTO symbols(id, file_id, name, qualified_name, kind, start_line, end_line, signature, doc,
               decorators, parent, chunk_id) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)""",
            [(symbol_id, file_id, symbol.name, symbol.qualified_name, symbol.kind, symbol.start_line, symbol.end_line,
              symbol.signature, symbol.doc, "\n".join(symbol.decorators), symbol.parent, chunk_of.get(symbol.start_line))
             for symbol_id, symbol in zip(symbol_rows, symbols, strict=True)],
        )
        self._db.executemany(
            "INSERT INTO symbols_fts(rowid, name, split, qualified) VALUES(?,?,?,?)",
            [(symbol_id, *fts) for symbol_id, fts in zip(symbol_rows, symbol_fts_rows, strict=True)],
        )
        self._db.executemany("INSERT OR IGNORE INTO names(name) VALUES(?)", [(name,) for name in {e.target for e in edges}])
        self._db.executemany(
            """INSERT INTO edge_rows(file_id, kind, source_id, name_id, line, chunk_id)
               VALUES(?, ?, ?, (SELECT id FROM names WHERE name = ?), ?, ?)""",
            [(file_id, EDGE_KIND_CODES[e.kind.value], symbol_ids.get(e.source), e.target, e.line, chunk_of.get(e.line))
             for e in edges],
        )
        return ids

    def record_skipped_file(self, record: FileRecord, reason: SkipReason) -> None:
        """Remember a file whose content can't be indexed, so refresh won't re-read it unchanged."""
        self._write_file_row(record, None, reason)

    def update_file_stat(self, path: str, size: int, mtime_ns: int) -> None:
        self._db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path))

    def delete_files(self, paths: Iterable[str]) -> None:
        ids = self._file_ids(paths)
        self._delete_contents(ids)
        self._db.execute("DELETE FROM files WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))

    def expect_files(self, size: int) -> None:
        """Before a large first build: hold the keyword rows written from here on, so a move
        need not read them back from FTS5 (the kernel's first build, reading back 200,000 chunks'
        rows at the compact switch, peaked at 4.4 GB); 0 after a run: drop them unless rows
        moved, and move what the run wrote since the last move when it is SETTLE_CHUNKS or more."""
        if not size:  # the run is over
            through = self._kept_through()
            if not through:
                self._pending = None  # an index that moved nothing will not need them
                return
            last = int(self._db.execute("SELECT coalesce(max(id), 0) FROM chunks").get)
            if self._pending is not None and last - through >= schema.SETTLE_CHUNKS:
                with self.transaction():  # a large build's last rows, moved too: FTS5 is left with edits only
                    self._move_keywords(last)
                self._give_back_free_pages()
        elif size >= schema.HOLD_FROM_BYTES and self._pending is None and not self._kept_through() \
                and self._db.execute("SELECT count(*) FROM chunks_fts_docsize").get == 0:
            self._pending = kept_postings.Pending()
            if not self._db.execute("SELECT 1 FROM chunks LIMIT 1").fetchone():
                # an empty index: pages freed later can be given back (`_give_back_free_pages`: the
                # last move empties FTS5, 51 MB on the kernel); VACUUM applies it, at once while empty
                self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
                self._give_back_free_pages(repack=True)
            self._pending_version = self._db.execute("PRAGMA data_version").get

    def clear_files(self) -> None:
        """Forget every file (a chunker change): the next refresh re-reads and re-chunks all."""
        for table in ("chunks_fts", "files_fts", "chunks", "symbols_fts", "edge_rows", "names", "symbols", "files"):
            self._db.execute(f"DELETE FROM {table}")
        self._db.execute("DROP TABLE IF EXISTS kept_postings")
        self._db.execute("DROP TABLE IF EXISTS kept_lengths")
        self._pending = None
        self._db.execute("DELETE FROM meta WHERE key IN (?, ?)", (KEPT_THROUGH, KEPT_PARTS))

