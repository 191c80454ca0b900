"""The SQLite index: one file holding files, chunks, the FTS5 keyword index and metadata.

Only this package speaks SQL. Writes happen inside `transaction()` blocks so a killed indexer
leaves the last committed state; WAL lets searches read while an indexer writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import apsw
import numpy as np
import sqlite_vec

from codewhere.errors import IndexFileError, ModelError, QueryError
from codewhere.types import Chunk, FileKind, FileRecord, Filters, ModelInfo, SkipReason, StoredChunk

log = logging.getLogger(__name__)

APPLICATION_ID = 0x63776872  # "cwhr": marks a SQLite file as a codewhere index
SCHEMA_VERSION = "2"
BUSY_TIMEOUT_MS = 10_000
# bm25 column weights: the path tokens repeat in every chunk of a file, so they count for less.
BM25_WEIGHT_PATH = 0.5
BM25_WEIGHT_BODY = 1.0

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    hash TEXT,
    kind TEXT NOT NULL,
    language TEXT NOT NULL,
    skip_reason TEXT
);
CREATE TABLE chunks(
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX chunks_file ON chunks(file_id);
CREATE INDEX chunks_hash ON chunks(content_hash);
CREATE TABLE definitions(
    chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    name TEXT NOT NULL
);
CREATE INDEX definitions_name ON definitions(name);
CREATE INDEX definitions_chunk ON definitions(chunk_id);
-- One vector per distinct chunk text: identical chunks (renames, copies) share it.
CREATE TABLE embeddings(id INTEGER PRIMARY KEY, content_hash TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    path, body, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
);
"""


@dataclass(frozen=True)
class FileState:
    size: int
    mtime_ns: int
    hash: str | None
    skip_reason: str | None


@dataclass(frozen=True)
class StoreStats:
    files: int
    chunks: int
    bytes: int
    skipped: dict[str, int]
    kinds: dict[str, int]
    languages: dict[str, int]
    meta: dict[str, str]


def _filter_sql(filters: Filters, file_alias: str = "f") -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if filters.scopes:
        ors = []
        for scope in filters.scopes:
            ors.append(f"({file_alias}.path = ? OR {file_alias}.path LIKE ? ESCAPE '\\')")
            escaped = scope.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params += [scope, escaped + "/%"]
        clauses.append("(" + " OR ".join(ors) + ")")
    if filters.exclude_kinds:
        clauses.append(f"{file_alias}.kind NOT IN ({','.join('?' * len(filters.exclude_kinds))})")
        params += [k.value for k in filters.exclude_kinds]
    return "".join(f" AND {c}" for c in clauses), params


class SqliteStore:
    def __init__(self, path: Path, connection: apsw.Connection) -> None:
        self.path = path
        self._db = connection

    # ---- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path) -> SqliteStore:
        """Open or create the index at `path`; refuse a file that is not a codewhere index."""
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = apsw.Connection(str(path))
            db.setbusytimeout(BUSY_TIMEOUT_MS)
            db.enable_load_extension(True)
            db.load_extension(sqlite_vec.loadable_path())
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        except apsw.NotADBError as exc:
            raise IndexFileError(
                f"{path} is not a SQLite database (corrupt or foreign index)",
                "delete it, or run `codewhere index --rebuild`",
            ) from exc
        except apsw.Error as exc:
            raise IndexFileError(f"cannot open the index {path}: {exc}", "check its permissions, or pass --index FILE") from exc
        if tables and app_id != APPLICATION_ID:
            db.close()
            raise IndexFileError(
                f"{path} is a SQLite file but not a codewhere index",
                "pass --index with another file name; codewhere will not overwrite it",
            )
        store = cls(path, db)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            if not tables:
                store._create()
            elif store.meta().get("schema_version") != SCHEMA_VERSION:
                # The index is derived data: an older layout is rebuilt, not migrated.
                log.warning("the index layout changed since %s was built; rebuilding it", path)
                db.close()
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
                return cls.open(path)
        except apsw.CorruptError as exc:
            db.close()
            raise IndexFileError(f"the index {path} is corrupt", "run `codewhere index --rebuild`") from exc
        except apsw.BusyError as exc:
            db.close()
            raise IndexFileError(f"the index {path} is locked by another process", "wait for it and retry") from exc
        return store

    @staticmethod
    def is_codewhere_index(path: Path) -> bool:
        try:
            db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                return db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
            finally:
                db.close()
        except apsw.Error:
            return False

    def _create(self) -> None:
        with self.transaction():
            self._db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            self._db.execute(_SCHEMA)
            self._db.execute("INSERT INTO meta VALUES('schema_version', ?)", (SCHEMA_VERSION,))
            self._db.execute("INSERT INTO meta VALUES('created_at', ?)", (str(time.time()),))

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # ---- meta ----------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    def set_meta(self, values: dict[str, str]) -> None:
        self._db.executemany(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            list(values.items()),
        )

    # ---- writing files and chunks (call inside transaction()) ----------------------------

    def file_states(self) -> dict[str, FileState]:
        rows = self._db.execute("SELECT path, size, mtime_ns, hash, skip_reason FROM files")
        return {path: FileState(size, mtime, h, skip) for path, size, mtime, h, skip in rows}

    def _upsert_file(self, record: FileRecord, digest: str | None, skip: SkipReason | None) -> int:
        row = self._db.execute(
            """INSERT INTO files(path, size, mtime_ns, hash, kind, language, skip_reason)
               VALUES(?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT(path) DO UPDATE SET size=excluded.size, mtime_ns=excluded.mtime_ns,
                 hash=excluded.hash, kind=excluded.kind, language=excluded.language,
                 skip_reason=excluded.skip_reason
               RETURNING id""",
            (record.path, record.size, record.mtime_ns, digest, record.kind.value, record.language,
             skip.value if skip else None),
        ).fetchone()
        return int(row[0])

    def _delete_chunks_of(self, file_id: int) -> None:
        self._db.execute(
            "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE file_id = ?)", (file_id,)
        )
        self._db.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))

    def replace_file(
        self, record: FileRecord, digest: str, chunks: Sequence[Chunk], fts_rows: Sequence[tuple[str, str]]
    ) -> list[int]:
        """Store a file and its chunks, replacing what the index had for that path.

        `fts_rows` holds each chunk's (path tokens, body tokens) for the keyword index.
        """
        file_id = self._upsert_file(record, digest, None)
        self._delete_chunks_of(file_id)
        ids: list[int] = []
        for chunk, (path_tokens, body_tokens) in zip(chunks, fts_rows, strict=True):
            chunk_id = self._db.execute(
                "INSERT INTO chunks(file_id, start_line, end_line, content_hash, text) VALUES(?,?,?,?,?) RETURNING id",
                (file_id, chunk.start_line, chunk.end_line, chunk.content_hash, chunk.text),
            ).fetchone()[0]
            self._db.execute(
                "INSERT INTO chunks_fts(rowid, path, body) VALUES(?, ?, ?)", (chunk_id, path_tokens, body_tokens)
            )
            if chunk.defines:
                self._db.executemany(
                    "INSERT INTO definitions(chunk_id, name) VALUES(?, ?)", [(chunk_id, n) for n in chunk.defines]
                )
            ids.append(chunk_id)
        return ids

    def record_skipped_file(self, record: FileRecord, reason: SkipReason) -> None:
        """Remember a file whose content can't be indexed, so refresh won't re-read it unchanged."""
        file_id = self._upsert_file(record, None, reason)
        self._delete_chunks_of(file_id)

    def update_file_stat(self, path: str, size: int, mtime_ns: int) -> None:
        self._db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path))

    def delete_files(self, paths: Iterable[str]) -> None:
        for path in paths:
            row = self._db.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
            if row:
                self._delete_chunks_of(row[0])
                self._db.execute("DELETE FROM files WHERE id = ?", (row[0],))

    # ---- vectors -------------------------------------------------------------------------

    def model(self) -> ModelInfo | None:
        meta = self.meta()
        if "model_fingerprint" not in meta:
            return None
        return ModelInfo(meta["model_id"], int(meta["model_dim"]), meta["model_fingerprint"])

    def bind_model(self, info: ModelInfo) -> None:
        """Record the index's model and create its vector table; the caller checked for a mismatch."""
        with self.transaction():
            self.set_meta({"model_id": info.id, "model_dim": str(info.dim), "model_fingerprint": info.fingerprint})
            self._db.execute("DELETE FROM embeddings")
            self._db.execute("DROP TABLE IF EXISTS vec_chunks")
            self._db.execute(
                f"CREATE VIRTUAL TABLE vec_chunks USING vec0(embedding float[{int(info.dim)}] distance_metric=cosine)"
            )

    def chunks_without_vectors(self, limit: int) -> list[tuple[str, str, str]]:
        """(content hash, path, text) of up to `limit` distinct chunk texts that have no vector yet."""
        rows = self._db.execute(
            """SELECT c.content_hash, f.path, c.text FROM chunks c JOIN files f ON f.id = c.file_id
               WHERE c.id IN (SELECT min(id) FROM chunks GROUP BY content_hash)
                 AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.content_hash = c.content_hash)
               LIMIT ?""",
            (limit,),
        )
        return [(h, p, t) for h, p, t in rows]

    def add_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        for content_hash, vector in zip(hashes, vectors, strict=True):
            row_id = self._db.execute(
                "INSERT INTO embeddings(content_hash) VALUES(?) RETURNING id", (content_hash,)
            ).fetchone()[0]
            self._db.execute(
                "INSERT INTO vec_chunks(rowid, embedding) VALUES(?, ?)", (row_id, np.asarray(vector, np.float32).tobytes())
            )

    def delete_orphan_vectors(self) -> int:
        """Drop vectors no chunk uses any more (after edits and deletions)."""
        orphans = [r[0] for r in self._db.execute(
            "SELECT id FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.content_hash = e.content_hash)"
        )]
        for row_id in orphans:
            self._db.execute("DELETE FROM vec_chunks WHERE rowid = ?", (row_id,))
            self._db.execute("DELETE FROM embeddings WHERE id = ?", (row_id,))
        return len(orphans)

    def vector_count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM embeddings").fetchone()[0])

    def vector_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the nearest chunks, best first."""
        if self.model() is None:
            return []
        blob = np.asarray(query, np.float32).tobytes()
        if filters.is_empty():
            # KNN over distinct texts, then every chunk holding that text.
            sql = """WITH knn AS (SELECT rowid, distance FROM vec_chunks WHERE embedding MATCH ? AND k = ?)
                     SELECT c.id, knn.distance FROM knn JOIN embeddings e ON e.id = knn.rowid
                     JOIN chunks c ON c.content_hash = e.content_hash ORDER BY knn.distance, c.id LIMIT ?"""
            params: tuple[object, ...] = (blob, limit, limit)
        else:
            where, fparams = _filter_sql(filters)
            sql = f"""SELECT c.id, vec_distance_cosine(v.embedding, ?) AS distance
                      FROM chunks c JOIN files f ON f.id = c.file_id
                      JOIN embeddings e ON e.content_hash = c.content_hash JOIN vec_chunks v ON v.rowid = e.id
                      WHERE 1{where} ORDER BY distance, c.id LIMIT ?"""
            params = (blob, *fparams, limit)
        try:
            rows = self._db.execute(sql, params).fetchall()
        except apsw.SQLError as exc:
            raise ModelError(f"vector search failed ({exc})", "run `codewhere index --rebuild`") from exc
        return [(int(cid), 1.0 - float(distance)) for cid, distance in rows]

    def clear_files(self) -> None:
        """Forget every file (a chunker change): the next refresh re-reads and re-chunks all."""
        self._db.execute("DELETE FROM chunks_fts")
        self._db.execute("DELETE FROM chunks")
        self._db.execute("DELETE FROM files")

    # ---- reading -------------------------------------------------------------------------

    def keyword_search(self, match: str, limit: int, filters: Filters) -> list[tuple[int, float]]:
        """(chunk id, BM25 score, higher is better) for an FTS5 MATCH expression."""
        where, params = _filter_sql(filters)
        sql = f"""SELECT c.id, bm25(chunks_fts, {BM25_WEIGHT_PATH}, {BM25_WEIGHT_BODY}) AS score
                  FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid JOIN files f ON f.id = c.file_id
                  WHERE chunks_fts MATCH ?{where} ORDER BY score LIMIT ?"""
        try:
            rows = self._db.execute(sql, (match, *params, limit)).fetchall()
        except apsw.SQLError as exc:
            raise QueryError(f"the keyword query could not run ({exc})", "remove unusual punctuation from the query") from exc
        return [(int(i), -float(s)) for i, s in rows]

    def chunks_defining(self, name: str, limit: int, filters: Filters) -> list[int]:
        where, params = _filter_sql(filters)
        sql = f"""SELECT DISTINCT c.id FROM definitions d JOIN chunks c ON c.id = d.chunk_id
                  JOIN files f ON f.id = c.file_id WHERE d.name = ?{where} ORDER BY c.id LIMIT ?"""
        return [int(r[0]) for r in self._db.execute(sql, (name, *params, limit))]

    def get_chunks(self, ids: Sequence[int]) -> dict[int, StoredChunk]:
        if not ids:
            return {}
        out: dict[int, StoredChunk] = {}
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            rows = self._db.execute(
                f"""SELECT c.id, f.path, c.start_line, c.end_line, f.kind, f.language, c.text
                    FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN ({','.join('?' * len(part))})""",
                part,
            )
            for cid, path, start_line, end_line, kind, language, text in rows:
                out[cid] = StoredChunk(cid, path, start_line, end_line, FileKind(kind), language, text)
        return out

    def chunk_spans(self, filters: Filters) -> list[tuple[str, int, int]]:
        """(path, start line, end line) of every chunk the filters let through."""
        where, params = _filter_sql(filters)
        return self._db.execute(
            f"SELECT f.path, c.start_line, c.end_line FROM chunks c JOIN files f ON f.id = c.file_id WHERE 1{where}",
            params,
        ).fetchall()

    def indexed_paths(self, filters: Filters) -> list[str]:
        where, params = _filter_sql(filters)
        return [r[0] for r in self._db.execute(f"SELECT f.path FROM files f WHERE f.skip_reason IS NULL{where}", params)]

    def stats(self) -> StoreStats:
        db = self._db
        files, size = db.execute("SELECT count(*), coalesce(sum(size), 0) FROM files WHERE skip_reason IS NULL").fetchone()
        chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        skipped = dict(db.execute("SELECT skip_reason, count(*) FROM files WHERE skip_reason IS NOT NULL GROUP BY 1"))
        kinds = dict(db.execute("SELECT kind, count(*) FROM files WHERE skip_reason IS NULL GROUP BY 1"))
        langs = dict(db.execute("SELECT language, count(*) FROM files WHERE skip_reason IS NULL GROUP BY 1 ORDER BY 2 DESC"))
        return StoreStats(files, chunks, size, skipped, kinds, langs, self.meta())
