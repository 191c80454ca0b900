"""The SQLite index: one file holding files, chunks, the FTS5 keyword index and metadata.

Only this package speaks SQL. Writes happen inside `transaction()` blocks so a killed indexer
leaves the last committed state; WAL lets searches read while an indexer writes.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import json
import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import apsw
import numpy as np
import sqlite_vec

from codewhere.chunk import line_starts, text_offset
from codewhere.errors import (
    CodewhereError,
    ForeignFileError,
    IndexFileError,
    IndexNotWritableError,
    ModelError,
    QueryError,
    QueryInterrupted,
)
from codewhere.locks import index_writer_lock
from codewhere.store import kept_postings, quantized
from codewhere.store.base import (
    CHUNK_ROW_COLUMNS,
    DEFINITION_SEPARATOR,
    KEPT_PRECISE,
    ChunkAt,
    EdgeSource,
    FileStamp,
    FileState,
    StoreStats,
    chunk_row,
    chunk_text,
    definition_rows,
    edge_sources_sql,
    grouped,
    like_escape,
    nearest_chunks,
    path_bounds,
    smallest_chunk_by_line,
    spelled_keys,
    targets_with_resolution,
    unit_columns,
)
from codewhere.store.source_text import SourceTexts
from codewhere.store.warm_keywords import Postings, best_documents, best_first, fold, length_norm
from codewhere.types import (
    Chunk,
    ChunkRow,
    Edge,
    EdgeHit,
    EdgeRow,
    EdgeSite,
    FileRecord,
    Filters,
    ModelInfo,
    SkipReason,
    Symbol,
    SymbolRef,
    SymbolRow,
    SymbolSpan,
    TermQuery,
)

log = logging.getLogger(__name__)

EDGE_PAGE = 50_000  # edges read at a time by a whole re-resolution
APPLICATION_ID = 0x63776872  # "cwhr": marks a SQLite file as a codewhere index
SCHEMA_VERSION = "11"
BUSY_TIMEOUT_MS = 10_000
WRITER_CACHE_KIB = 65_536  # page cache of a connection that writes (SQLite: negative cache_size = KiB)
QUANTIZE_PAGE = 50_000  # vectors read at a time when an index first quantizes them
SIGN_PAGE = 256  # vectors per row of `vector_signs` (8 KB at 256 dimensions)
COMPACT = "compact"  # meta: "1" once the index holds QUANTIZE_FROM vectors and keeps the compact form
TIER_COMPLETE = "tier_complete"  # meta: "1" while the quality tier covers every chunk text (tier.py); a chunk write clears it
KEPT_THROUGH = "kept_through"  # meta: the largest chunk id whose keyword rows moved out of FTS5 (kept_postings.py)
KEPT_PARTS = "kept_parts"  # meta: how many moves so far (each adds a part to the terms it holds)
HOLD_FROM_BYTES = 128 << 20  # a first build reading this much likely turns compact (the kernel: 200k chunks by 130 MB): moves from the start
FOLD_CHUNKS = 100_000  # FTS5's rows move once this many chunks were written since the last move
SETTLE_CHUNKS = 10_000  # and at the end of a run, once this many: a search reads FTS5's rows apart, slower
TEXT_LEVEL = 6  # zlib level of a compact index's chunk text (the kernel's: 2.4x smaller; level 1: 2.3x)
# The compact form of an index past QUANTIZE_FROM vectors: the vectors' sign bits (32 bytes each, in
# pages) and byte codes instead of float32 vectors, so a one-shot search reads the bits in one pass
# for a Hamming shortlist and the codes of the shortlist, as the warm reader searches (sqlite-vec's
# scan of the kernel's 1.37 M float32 vectors: 0.6 s); and chunk text compressed.
# stored codes: a new name goes at the end (graph.Resolution has the levels)
EDGE_KIND_CODES = {name: code for code, name in enumerate(("call", "import", "inherit"))}
RESOLUTION_CODES = {name: code for code, name in enumerate(
    ("unresolved", "scip", "lsp", "jedi", "import", "same-file", "unique", "ambiguous", "external"))}


def _hash_key(content_hash: str) -> int:
    """A chunk text's hash as the index keeps it: its first 64 bits, a signed integer (8 bytes
    where 32 characters were, in the chunks, their index and the embeddings: on the kernel
    `chunks_hash` 62 → 25 MiB, `embeddings` and its key 114 → 47; 1.4 M texts collide with odds
    near 1e-7). The store hands back those 16 hex
    digits, which key the same."""
    return int(content_hash[:16], 16) - (1 << 63)


def _hash_text(key: int) -> str:
    return f"{key + (1 << 63):016x}"


def _decoded(column: str, codes: dict[str, int]) -> str:
    """SQL reading a code column back as its name."""
    return f"CASE {column} " + " ".join(f"WHEN {code} THEN '{name}'" for name, code in codes.items()) + " END"


_COMPACT_SCHEMA = """
CREATE TABLE IF NOT EXISTS vector_signs(page INTEGER PRIMARY KEY, bits BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS vector_codes(id INTEGER PRIMARY KEY, scale REAL NOT NULL, norm REAL NOT NULL, codes BLOB NOT NULL);
"""
# A large index's keyword postings without positions (kept_postings.py): each term's chunks, a part
# per move (files_fts's postings are its chunks', mapped to their files); `kept_lengths` by `tab`:
# 0 each chunk's length (dense), 1 each file's by its first chunk id (sparse).
_KEPT_SCHEMA = """
CREATE TABLE IF NOT EXISTS kept_postings(
    part INTEGER NOT NULL, term TEXT NOT NULL, docs BLOB NOT NULL, PRIMARY KEY(part, term)
) WITHOUT ROWID;  -- a move appends its part at the end of the b-tree; a term is one seek a part
CREATE TABLE IF NOT EXISTS kept_lengths(
    tab INTEGER NOT NULL, page INTEGER NOT NULL, lengths BLOB NOT NULL, PRIMARY KEY(tab, page)
) WITHOUT ROWID;
"""
# The quality tier (tier.py): a second model's vectors, one per distinct chunk text, float16,
# filled in the background after the index is complete; the tier model is recorded in meta.
_TIER_SCHEMA = """
CREATE TABLE IF NOT EXISTS tier_vectors(content_hash INTEGER PRIMARY KEY, vector BLOB NOT NULL);
"""
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
    content_hash INTEGER NOT NULL,  -- _hash_key of the text's hash
    text TEXT,  -- a compact index: zlib-compressed, or NULL where text_at and text_len cut it from its file
    text_at INTEGER,  -- where the text starts in its file's text (source_text.py)
    text_len INTEGER,
    embed_text TEXT,  -- NULL: not embedded (imports and assignments only)
    mentions TEXT,  -- documentation: the code names its prose mentions, space-separated
    unit_start INTEGER,  -- the definition the chunk belongs to (types.Unit): its lines and name; NULL: none
    unit_end INTEGER,
    unit_name TEXT
);
CREATE INDEX chunks_file ON chunks(file_id);
CREATE INDEX chunks_hash ON chunks(content_hash);
CREATE TABLE definitions(
    chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    name TEXT NOT NULL,  -- compound (`raiseforstatus`): what a lookup matches
    spelled TEXT NOT NULL  -- as written (`raise_for_status`, `Helpers`)
);
CREATE INDEX definitions_name ON definitions(name);
CREATE INDEX definitions_chunk ON definitions(chunk_id);
-- One vector per distinct chunk text: identical chunks (renames, copies) share it.
CREATE TABLE embeddings(id INTEGER PRIMARY KEY, content_hash INTEGER NOT NULL UNIQUE);
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    path, body, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
);
-- One row per file (rowid: its first chunk's id, never reused while the file's row stands; a
-- compact index never reuses it): its path and all its chunks' tokens, for a file's BM25.
CREATE VIRTUAL TABLE files_fts USING fts5(
    path, body, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
);
CREATE TABLE symbols(
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    qualified_name TEXT NOT NULL,
    kind TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    signature TEXT NOT NULL,
    doc TEXT NOT NULL,
    decorators TEXT NOT NULL,
    parent TEXT NOT NULL,
    chunk_id INTEGER  -- the smallest chunk holding the definition's first line
);
CREATE INDEX symbols_name ON symbols(name);
CREATE INDEX symbols_qualified ON symbols(qualified_name);
CREATE INDEX symbols_file ON symbols(file_id);
CREATE VIRTUAL TABLE symbols_fts USING fts5(
    name, split, qualified, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
);
-- The graph's 4.9 M edges on the kernel: kind and resolution kept as small codes, the target name
-- once in `names` (496k distinct there), so a row is ids and lines (0.15 GB less on the kernel);
-- `edges` reads them back as names, as every query asks for them.
-- source_id: the enclosing symbol (NULL at module level); target_id: set by resolution.
CREATE TABLE names(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE edge_rows(
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    kind INTEGER NOT NULL,  -- EDGE_KIND_CODES
    source_id INTEGER,
    name_id INTEGER NOT NULL,  -- names.id: the target's name as written
    target_id INTEGER,
    resolution INTEGER NOT NULL DEFAULT 0,  -- RESOLUTION_CODES
    line INTEGER NOT NULL,
    chunk_id INTEGER  -- the smallest chunk holding the line
);
CREATE INDEX edges_file ON edge_rows(file_id);
CREATE INDEX edges_source ON edge_rows(source_id) WHERE source_id IS NOT NULL;  -- 21 % module-level on the kernel
CREATE INDEX edges_target ON edge_rows(target_id) WHERE target_id IS NOT NULL;  -- 62 % resolve to no symbol there
CREATE INDEX edges_name ON edge_rows(name_id);
CREATE INDEX edges_chunk ON edge_rows(chunk_id);
CREATE VIEW edges AS SELECT e.id, e.file_id, {kind} AS kind, e.source_id, n.name AS target_name, e.target_id,
                            {resolution} AS resolution, e.line, e.chunk_id, e.name_id
                     FROM edge_rows e JOIN names n ON n.id = e.name_id;
""".format(kind=_decoded("e.kind", EDGE_KIND_CODES), resolution=_decoded("e.resolution", RESOLUTION_CODES))


_SEP = f"char({ord(DEFINITION_SEPARATOR)})"


def _mapped(path: Path, exc: apsw.Error) -> CodewhereError | None:
    """apsw's errors that a user or the machine causes, as the one-line errors they are."""
    if isinstance(exc, apsw.InterruptError):
        return QueryInterrupted("the call was stopped before it finished (time limit, or cancelled)",
                                "ask for less: a smaller --depth, a narrower --scope, or a more specific name")
    if isinstance(exc, (apsw.FullError, apsw.ReadOnlyError, apsw.IOError, apsw.CantOpenError)):
        return _write_error(path, exc)
    if isinstance(exc, apsw.CorruptError):
        return _corrupt(path)
    return None


def _configure(db: apsw.Connection) -> None:
    """Every connection that writes: WAL (readers go on during writes), commits that survive a
    killed process, foreign keys (a file's rows go with it)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:  # SQLite answers BUSY here at once, without its busy handler, while another
            db.execute("PRAGMA journal_mode=WAL")  # connection sets up a new file
            break
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    # a writer's transactions span thousands of files: with SQLite's default 2 MB of pages they
    # spill to the log mid-transaction (Django cold, two workers: writer SQL 10.7 -> 5.7 s, process
    # CPU -6 %, sys 4.1 -> 1.5 s; wall time within the noise)
    db.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")


def _packed(text: str) -> bytes:
    return zlib.compress(text.encode(), TEXT_LEVEL)


def _stored_text(text: str, at: int, compact: bool) -> tuple[str | bytes | None, int | None, int | None]:
    """(text, text_at, text_len) of a chunk row: a compact index cuts what it can from the file."""
    if not compact:
        return text, None, None
    return (None, at, len(text)) if at >= 0 else (_packed(text), None, None)


def _sign_page_bytes(width: int) -> int:
    return SIGN_PAGE // 8 + SIGN_PAGE * width


def _sign_page(bits: bytes | bytearray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(live slots, sign bytes of each slot) of a `vector_signs` page: the second a view, which
    a bytearray page lets the caller write."""
    raw = np.frombuffer(bits, np.uint8)
    return np.unpackbits(raw[:SIGN_PAGE // 8]).astype(bool), raw[SIGN_PAGE // 8:].reshape(SIGN_PAGE, width)


def _identity(db: apsw.Connection) -> tuple[int, int]:
    """(application id, number of schema objects): whose file this is, and whether it is empty."""
    # one statement, one snapshot: read apart, another connection's commit of a new index could
    # fall between the two and make it look like someone else's file
    row = db.execute(
        "SELECT (SELECT application_id FROM pragma_application_id()), (SELECT count(*) FROM sqlite_master)"
    ).fetchone()
    assert row is not None  # a SELECT of two values always has its row
    return int(row[0]), int(row[1])


def _corrupt(path: Path) -> IndexFileError:
    return IndexFileError(f"the index {path} is corrupt", "run `codewhere index --rebuild`")


# Read on connections of their own (each with its lock), so a warm reader reading a common term's
# postings in a thread (a second on the kernel) never holds up a search: one for reads in a
# thread, one for the few a search makes itself.
_POSTINGS_READS = frozenset({"document_lengths", "term_postings", "term_instances"})
IN_THREAD, IN_SEARCH = 0, 1
_LISTED_IDS = 500  # ids passed as SQL parameters; more go as one JSON array
_FTS_TABLES = ("chunks_fts", "files_fts")


def _apsw_errors_mapped(cls: type) -> type:
    """Every public method turns the apsw errors above into CodewhereErrors: a full disk, a
    read-only file or an interrupted query is one line for the user, never a traceback."""

    def guard(method: Callable[..., object]) -> Callable[..., object]:
        own_connection = method.__name__ in _POSTINGS_READS

        @functools.wraps(method)
        def guarded(self: SqliteStore, *args: object, **kwargs: object) -> object:
            try:
                with contextlib.nullcontext() if own_connection else self._use:
                    return method(self, *args, **kwargs)
            except apsw.Error as exc:
                mapped = _mapped(self.path, exc)
                if mapped is None:
                    raise
                raise mapped from exc

        return guarded

    for name, member in list(vars(cls).items()):
        if name == "interrupt":
            continue  # called from another thread to stop a running statement: it must not wait for it
        if inspect.isfunction(member) and not name.startswith("_") and not inspect.isgeneratorfunction(
            getattr(member, "__wrapped__", member)
        ):
            setattr(cls, name, guard(member))
    return cls


def _write_error(path: Path, exc: BaseException) -> IndexNotWritableError:
    """What a failed write to the index file means for the user, and what fixes it."""
    if isinstance(exc, apsw.FullError) or "disk is full" in str(exc) or "No space" in str(exc):
        return IndexNotWritableError(f"the disk is full while writing the index {path}",
                                     "free some space and run again; the index keeps its last committed state")
    return IndexNotWritableError(f"the index {path} cannot be written ({exc})",
                                 "make the file, its -wal and -shm files and its folder writable (chmod, chattr -i), "
                                 "or pass --index FILE")


def _fts_table(table: str) -> str:
    if table not in _FTS_TABLES:
        raise ValueError(f"not a keyword table: {table}")
    return table


def _varint_sum(blob: bytes) -> int:
    """The sum of the SQLite varints in `blob` (FTS5's docsize record: one per column)."""
    total, value, at = 0, 0, 0
    while at < len(blob):
        byte = blob[at]
        value = (value << 7) | (byte & 0x7F)
        at += 1
        if byte < 0x80:
            total, value = total + value, 0
    return total


def fts5_expression(query: TermQuery) -> str:
    """An FTS5 expression for the terms; each is quoted, so no user text is parsed as syntax."""
    quoted = ['"' + t.replace('"', '""') + '"' for t in query.terms]
    if query.match == "name":
        return f"name : {quoted[0]}"
    if query.match == "phrase":
        return 'split : "' + " ".join(t.replace('"', '""') for t in query.terms) + '"'
    return (" AND " if query.match == "all" else " OR ").join(quoted)


def _filter_sql(filters: Filters, file_alias: str = "f", repo: str = "") -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if filters.repos and repo not in filters.repos:
        clauses.append("0")  # a one-folder index holds one repository
    if filters.scopes:
        ors = []
        for scope in filters.scopes:
            ors.append(f"({file_alias}.path = ? OR {file_alias}.path LIKE ? ESCAPE '\\')")
            escaped = like_escape(scope)
            params += [scope, escaped + "/%"]
        clauses.append("(" + " OR ".join(ors) + ")")
    if filters.exclude_kinds:
        clauses.append(f"{file_alias}.kind NOT IN ({','.join('?' * len(filters.exclude_kinds))})")
        params += [k.value for k in filters.exclude_kinds]
    return "".join(f" AND {c}" for c in clauses), params



_CANDIDATE_SQL = "SELECT " + CHUNK_ROW_COLUMNS.format(  # one folder: no repository name
    repo="''", definitions=f"(SELECT group_concat(d.name || {_SEP} || d.spelled, {_SEP}) FROM definitions d WHERE d.chunk_id = c.id)",
) + ", c.text_at, c.text_len, f.hash FROM chunks c JOIN files f ON f.id = c.file_id"  # then where a text is cut from
# columns of a _CANDIDATE_SQL row: CHUNK_ROW_COLUMNS' path, text and file id, then the three added
_PATH, _TEXT, _FILE_ID, _TEXT_AT, _TEXT_LEN, _FILE_HASH = 1, 6, 13, 14, 15, 16
ROW_PAGE = 1_000  # chunk rows read at a time by rows_of_files
# on the rows themselves: a search asks this of every candidate, and needs no target name
_CALL_TARGETS_SQL = f"""SELECT DISTINCT e.chunk_id, s.chunk_id, {_decoded("e.resolution", RESOLUTION_CODES)}
                        FROM edge_rows e JOIN symbols s ON s.id = e.target_id
                        WHERE e.kind = {EDGE_KIND_CODES["call"]} AND s.chunk_id IS NOT NULL AND s.chunk_id != e.chunk_id"""
_FILE_CHUNKS_SQL = """SELECT f.id, f.path, f.hash, f.kind, f.language, min(c.id), max(c.id), count(*)
                       FROM files f JOIN chunks c ON c.file_id = f.id GROUP BY f.id"""


@_apsw_errors_mapped
class SqliteStore:
    """One folder's index in one SQLite file (the embedded default)."""

    shared = False
    keywords_bm25 = True  # keyword scores are FTS5's bm25: a warm reader may compute them (warm_keywords.py)

    def __init__(self, path: Path, connection: apsw.Connection, repo: str = "") -> None:
        self.path = path
        self.location = str(path)
        self.repo = repo
        self._db = connection
        self._swaps = 0  # rebuilds copied over this connection's file
        # one thread at a time on the connection (apsw refuses a second one mid-call): every
        # public method, and a transaction or read snapshot for as long as it lasts
        self._use = threading.RLock()
        self._postings_dbs: list[apsw.Connection | None] = [None, None]  # IN_THREAD, IN_SEARCH: opened when first read
        self._postings_use = [threading.Lock(), threading.Lock()]
        self._staged_signs: dict[int, bytearray] = {}  # sign pages changed by this transaction
        self._vectors_added = False  # by this transaction: it may have crossed QUANTIZE_FROM
        self._turned_compact = False  # by this transaction: its commit is followed by a repack
        # the keyword rows in FTS5 since the last move, when this connection wrote all of them
        # (kept_postings.Pending); None: the next move reads them back from FTS5
        self._pending: kept_postings.Pending | None = None
        self._pending_version: object = None  # data_version after our last commit: another writer moves it
        # the folder's files, when this process may read them: a compact index then keeps where
        # each chunk's text lies in its file instead of the text (None: it keeps every text)
        self.sources: SourceTexts | None = None

    # ---- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, repo: str = "", lock_wait: float = 30.0) -> SqliteStore:
        """Open or create the index at `path`; refuse a file that is not a codewhere index.

        An index of an older layout is derived data: it is rebuilt, not migrated, but only
        under the writer lock (waiting up to `lock_wait`), so a running indexer never loses
        its file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        db, tables = cls._connect(path)
        store = cls(path, db, repo)
        try:
            _configure(db)
            if not tables:
                store._create()
            elif store.meta().get("schema_version") != SCHEMA_VERSION:
                db.close()
                with index_writer_lock(path, lock_wait):
                    if cls._schema_version(path) != SCHEMA_VERSION:  # another process may have done it
                        log.warning("the index layout changed since %s was built; rebuilding it", path)
                        cls.remove(path)
                return cls.open(path, repo, lock_wait)
        except apsw.CorruptError as exc:
            db.close()
            raise _corrupt(path) from exc
        except apsw.BusyError as exc:
            db.close()
            raise IndexFileError(f"the index {path} is locked by another process", "wait for it and retry") from exc
        except (apsw.ReadOnlyError, apsw.CantOpenError, apsw.IOError, apsw.FullError) as exc:
            db.close()
            if not tables:
                raise _write_error(path, exc) from exc
            store = cls(path, cls._connect_read_only(path), repo)  # search what is there
        return store

    @staticmethod
    def _connect(path: Path) -> tuple[apsw.Connection, int]:
        """A connection with sqlite-vec loaded, and how many schema objects the file holds."""
        try:
            db = apsw.Connection(str(path))
            db.setbusytimeout(BUSY_TIMEOUT_MS)
            db.enable_load_extension(True)
            db.load_extension(sqlite_vec.loadable_path())
            app_id, tables = _identity(db)
        except apsw.NotADBError as exc:
            raise IndexFileError(
                f"{path} is not a SQLite database (corrupt, truncated or foreign)",
                "run `codewhere index --rebuild` (it replaces a damaged index in the cache dir), or pass --index FILE",
            ) from exc
        except apsw.CorruptError as exc:
            raise _corrupt(path) from exc
        except (apsw.CantOpenError, apsw.ReadOnlyError, apsw.IOError, apsw.FullError) as exc:
            if not path.is_file():
                if isinstance(exc, apsw.FullError):
                    raise _write_error(path, exc) from exc
                raise IndexFileError(f"cannot create the index {path}: {exc}",
                                     "make its folder writable, or pass --index FILE") from exc
            # a folder we may not write, or a full disk: no -wal or -shm can be made, the index
            # is still searched as last committed
            db = SqliteStore._connect_read_only(path)
            app_id, tables = _identity(db)
        except apsw.Error as exc:
            raise IndexFileError(f"cannot open the index {path}: {exc}", "check its permissions, or pass --index FILE") from exc
        if tables and app_id != APPLICATION_ID:
            db.close()
            raise ForeignFileError(
                f"{path} is a SQLite file but not a codewhere index",
                "pass --index with another file name; codewhere will not overwrite it",
            )
        return db, int(tables)

    @staticmethod
    def _connect_read_only(path: Path) -> apsw.Connection:
        """A file this process may not write (a read-only file or folder, a read-only `-shm`):
        searched as last committed. `immutable` reads it without the WAL's shared memory."""
        last: apsw.Error | None = None
        for uri in (f"file:{path}?mode=ro", f"file:{path}?immutable=1"):
            try:
                db = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
                db.setbusytimeout(BUSY_TIMEOUT_MS)
                db.enable_load_extension(True)
                db.load_extension(sqlite_vec.loadable_path())
                db.execute("SELECT count(*) FROM meta").fetchone()
                return db
            except apsw.Error as exc:
                last = exc
        raise IndexFileError(f"cannot read the index {path}: {last}", "check its permissions, or pass --index FILE")

    @staticmethod
    def _schema_version(path: Path) -> str | None:
        try:
            db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                return str(row[0]) if row else None
            finally:
                db.close()
        except apsw.Error:
            return None

    @property
    def read_only(self) -> bool:
        return bool(self._db.readonly("main"))

    @contextmanager
    def rebuilding(self) -> Iterator[SqliteStore]:
        """A new, empty index beside this one for a rebuild. When the block ends without error,
        its content replaces this index's in one transaction (SQLite's backup API), so readers
        see the old index or the new, never neither; a killed or failed rebuild leaves the old.
        The caller holds the writer lock."""
        if self.read_only:
            raise _write_error(self.path, apsw.ReadOnlyError("the index file is read-only"))
        beside = self.path.with_name(self.path.name + ".rebuild")
        SqliteStore.remove(beside)  # what a killed rebuild left
        fresh = SqliteStore.open(beside, self.repo)
        fresh.sources = self.sources
        try:
            yield fresh
            fresh._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            logging.getLogger("codewhere.phase").info("swap")
            self._swaps += 1  # a backup moves neither data_version nor total_changes: the change token counts it
            try:
                with self._db.backup("main", fresh._db, "main") as copy:
                    copy.step(-1)
            except apsw.FullError as exc:
                raise _write_error(self.path, exc) from exc
            self._db.close()  # virtual tables and cached statements belong to the old content
            self._db, _ = self._connect(self.path)
            _configure(self._db)
        finally:
            fresh.close()
            SqliteStore.remove(beside)

    @staticmethod
    def remove(path: Path) -> None:
        """Delete the index file with its WAL and shared-memory files (call under the writer lock)."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    @staticmethod
    def is_codewhere_index(path: Path) -> bool:
        """Whether the file's SQLite header carries our application id: read from the header's
        bytes, so a file damaged past its first page (a truncated copy) is still known as ours."""
        try:
            with path.open("rb") as file:
                header = file.read(72)
        except OSError:
            return False
        return header[:16] == b"SQLite format 3\0" and int.from_bytes(header[68:72], "big") == APPLICATION_ID

    def _create(self) -> None:
        with self.transaction():
            if _identity(self._db)[1]:
                return  # another connection created it between our look and our write lock
            self._db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            self._db.execute(_SCHEMA)
            self._db.execute("INSERT INTO meta VALUES('schema_version', ?)", (SCHEMA_VERSION,))
            self._db.execute("INSERT INTO meta VALUES('created_at', ?)", (str(time.time()),))

    def close(self) -> None:
        self._db.close()
        for slot, lock in enumerate(self._postings_use):
            with lock:
                db, self._postings_dbs[slot] = self._postings_dbs[slot], None
                if db is not None:
                    db.close()

    @contextmanager
    def writer_lock(self, wait_seconds: float) -> Iterator[None]:
        with index_writer_lock(self.path, wait_seconds):
            # a rebuild runs only under this lock: a `.rebuild` file found now is a killed one's.
            # (The connection is not asked whether it is read-only: a search may be using it.)
            with contextlib.suppress(OSError):
                SqliteStore.remove(self.path.with_name(self.path.name + ".rebuild"))
            yield

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction; inside another, part of that one (it commits or rolls back whole)."""
        with self._use:
            if not self._db.getautocommit():
                yield
                return
            yield from self._outer_transaction()

    def _outer_transaction(self) -> Iterator[None]:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except apsw.Error as exc:
            raise (_mapped(self.path, exc) or exc) from exc
        if self._pending is not None and self._db.execute("PRAGMA data_version").get != self._pending_version:
            self._pending = None  # another connection wrote since: what we hold may not be what FTS5 holds
        try:
            yield
            self._finish_vectors()
            self._move_keywords_if_due()
        except BaseException:
            self._staged_signs.clear()
            self._vectors_added = False
            self._turned_compact = False
            self._pending = None
            if not self._db.getautocommit():  # SQLite may already have rolled back (a full disk)
                self._db.execute("ROLLBACK")
            raise
        try:
            self._db.execute("COMMIT")
        except apsw.Error as exc:
            if not self._db.getautocommit():
                self._db.execute("ROLLBACK")
            self._turned_compact = False
            self._pending = None
            raise (_mapped(self.path, exc) or exc) from exc
        self._pending_version = self._db.execute("PRAGMA data_version").get
        if self._turned_compact:
            self._turned_compact = False
            self._repack()

    def interrupt(self) -> None:
        """Stop the statement running in another thread (it raises QueryInterrupted there)."""
        self._db.interrupt()

    # ---- meta ----------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        return {str(key): str(value) for key, value in self._db.execute("SELECT key, value FROM meta")}

    def set_meta(self, values: dict[str, str]) -> None:
        self._db.executemany(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            list(values.items()),
        )

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

    def _next_ids(self, table: str, n: int) -> list[int]:
        """`n` row ids for new rows of `table` (one of ours, INTEGER PRIMARY KEY without
        AUTOINCREMENT): those SQLite would give, one past the largest; the caller holds the write."""
        if not n:  # most files define no symbols and many add no new vector: no query
            return []
        first = int(self._db.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").get)  # noqa: S608 — our table names
        if table == "chunks":  # a chunk id the kept postings name is never given again
            first = max(first, self._kept_through() + 1)
        return list(range(first, first + n))

    def record_skipped_file(self, record: FileRecord, reason: SkipReason) -> None:
        """Remember a file whose content can't be indexed, so refresh won't re-read it unchanged."""
        self._write_file_row(record, None, reason)

    def update_file_stat(self, path: str, size: int, mtime_ns: int) -> None:
        self._db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path))

    def delete_files(self, paths: Iterable[str]) -> None:
        ids = self._file_ids(paths)
        self._delete_contents(ids)
        self._db.execute("DELETE FROM files WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))

    # ---- vectors -------------------------------------------------------------------------

    def model(self) -> ModelInfo | None:
        return self._recorded_model("model")

    def _recorded_model(self, prefix: str) -> ModelInfo | None:
        """The model recorded under `prefix`_id, _dim and _fingerprint in meta (those keys only:
        meta also holds every folder's freshness stamps)."""
        held = dict(self._db.execute("SELECT key, value FROM meta WHERE key IN (?, ?, ?)",
                                     (f"{prefix}_id", f"{prefix}_dim", f"{prefix}_fingerprint")))
        if f"{prefix}_fingerprint" not in held:
            return None
        return ModelInfo(str(held[f"{prefix}_id"]), int(held[f"{prefix}_dim"]), str(held[f"{prefix}_fingerprint"]))

    def _record_model(self, prefix: str, info: ModelInfo) -> None:
        self.set_meta({f"{prefix}_id": info.id, f"{prefix}_dim": str(info.dim), f"{prefix}_fingerprint": info.fingerprint})

    def bind_model(self, info: ModelInfo) -> None:
        """Record the index's model and create its vector table; the caller checked for a mismatch."""
        with self.transaction():
            self._record_model("model", info)
            self._db.execute("DELETE FROM embeddings")
            self._db.execute("DROP TABLE IF EXISTS vec_chunks")
            self._drop_compact()
            self._db.execute(
                f"CREATE VIRTUAL TABLE vec_chunks USING vec0(embedding float[{int(info.dim)}] distance_metric=cosine)"
            )

    def chunks_without_vectors(self, limit: int, after_id: int = 0) -> list[tuple[int, str, str]]:
        """(chunk id, content hash, embedding text) of up to `limit` chunks after `after_id` whose
        text has no vector yet, in id order (keyset paging: each page costs the same)."""
        rows = self._db.execute(
            """SELECT c.id, c.content_hash, c.embed_text FROM chunks c
               WHERE c.id > ? AND c.embed_text IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.content_hash = c.content_hash)
               ORDER BY c.id LIMIT ?""",
            (after_id, limit),
        )
        return [(i, _hash_text(h), t) for i, h, t in rows]

    def count_chunks_without_vectors(self, after_id: int = 0) -> int:
        """How many chunks `chunks_without_vectors` would page through (for a progress total)."""
        row = self._db.execute(
            """SELECT count(*) FROM chunks c WHERE c.id > ? AND c.embed_text IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.content_hash = c.content_hash)""",
            (after_id,),
        ).fetchone()
        return int(row[0]) if row else 0

    def add_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Store each text's vector; a text that has one keeps it (within `hashes`, the first)."""
        keys = [_hash_key(h) for h in hashes]
        known = {h for (h,) in self._db.execute(
            "SELECT content_hash FROM embeddings WHERE content_hash IN (SELECT value FROM json_each(?))",
            (json.dumps(keys),),
        )}
        first: dict[int, int] = {}
        for position, key in enumerate(keys):
            if key not in known:
                first.setdefault(key, position)
        with self.transaction():  # quantized copies are finished at its commit
            ids = self._next_ids("embeddings", len(first))
            self._db.executemany("INSERT INTO embeddings(id, content_hash) VALUES(?, ?)", zip(ids, first, strict=True))
            if ids and self._compact():  # kept quantized only
                self._write_quantized(np.asarray(ids, np.int64), np.asarray(vectors, np.float32)[list(first.values())])
            else:
                self._db.executemany(
                    "INSERT INTO vec_chunks(rowid, embedding) VALUES(?, ?)",
                    [(row_id, np.asarray(vectors[position], np.float32).tobytes())
                     for row_id, position in zip(ids, first.values(), strict=True)],
                )
            self._vectors_added = self._vectors_added or bool(ids)

    def delete_orphan_vectors(self, among: Sequence[str] | None = None) -> int:
        """Drop vectors no chunk uses any more (after edits and deletions); only those of the
        texts `among`, when the caller knows which texts it removed."""
        orphan_sql = "SELECT id FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.content_hash = e.content_hash)"
        if among is None:
            orphans = [r[0] for r in self._db.execute(orphan_sql)]
        else:
            orphans = [r[0] for r in self._db.execute(
                orphan_sql + " AND e.content_hash IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(_hash_key(h) for h in among)),),
            )]
        with self.transaction():
            rows = [(i,) for i in orphans]
            self._db.executemany("DELETE FROM embeddings WHERE id = ?", rows)
            if rows and self._compact():
                self._db.executemany("DELETE FROM vector_codes WHERE id = ?", rows)
                self._stage_signs(np.asarray(orphans, np.int64), None)
            else:
                self._db.executemany("DELETE FROM vec_chunks WHERE rowid = ?", rows)
        return len(orphans)

    # ---- the quality tier: a second model's vectors (tier.py) --------------------------------

    def tier_model(self) -> ModelInfo | None:
        return self._recorded_model("tier_model")

    def clear_tier(self) -> None:
        """Drop every tier vector (a benchmark's cold fill); the model stays recorded."""
        with self.transaction():
            if self.has_tier():
                self._db.execute("DELETE FROM tier_vectors")
            self._tier_stale()

    def bind_tier_model(self, info: ModelInfo) -> None:
        """Record the tier's model; another model's vectors are dropped (they would not compare),
        and with them the tier's claim to be whole."""
        with self.transaction():
            self._db.execute(_TIER_SCHEMA)
            if self.tier_model() != info:
                self._db.execute("DELETE FROM tier_vectors")
                self._tier_stale()
                self._record_model("tier_model", info)

    def has_tier(self) -> bool:
        """Whether a quality tier was ever started in this index."""
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'tier_vectors'").fetchone() is not None

    def tier_texts_missing(self, limit: int) -> list[tuple[str, str]]:
        """(content hash, embedding text) of up to `limit` distinct chunk texts without a tier vector."""
        if not self.has_tier():
            return []
        rows = cast(list[tuple[int, str, str | bytes | None, str, str | None, int, int]], self._db.execute(
            """SELECT c.content_hash, c.embed_text, c.text, f.path, f.hash, c.text_at, c.text_len
               FROM chunks c JOIN files f ON f.id = c.file_id
               WHERE c.embed_text IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM tier_vectors t WHERE t.content_hash = c.content_hash)
               GROUP BY c.content_hash LIMIT ?""", (limit,)).fetchall())
        return [(_hash_text(h), self._embedding_text(embed, stored, path, digest, at, length))
                for h, embed, stored, path, digest, at, length in rows]

    def _embedding_text(self, embed: str, stored: str | bytes | None, path: str, digest: str | None, at: int,
                        length: int) -> str:
        """A chunk's embedding text; an empty one was embedded by a worker and not kept (reading.py):
        the path and the chunk's text stand for it."""
        return embed or f"{path}\n{self._row_text(stored, path, digest, at, length)}"

    def _tier_stale(self) -> None:
        """The tier no longer covers every text (until a fill says so again)."""
        self._db.execute("DELETE FROM meta WHERE key = ?", (TIER_COMPLETE,))

    def _tier_stale_unless_covered(self, hashes: Sequence[str]) -> None:
        """A file's chunks are written: a whole tier stays whole only if each of their texts has
        its vector (a renamed or re-saved file's do; an edited one's new text does not)."""
        if self.tier_complete() and self._db.execute(
            """SELECT 1 FROM json_each(?) j
               WHERE NOT EXISTS (SELECT 1 FROM tier_vectors t WHERE t.content_hash = j.value) LIMIT 1""",
            (json.dumps([_hash_key(h) for h in hashes]),),
        ).fetchone():
            self._tier_stale()

    def tier_complete(self) -> bool:
        """Whether the tier covers every chunk text, as the last fill found under the writer lock."""
        value = self._db.execute("SELECT value FROM meta WHERE key = ?", (TIER_COMPLETE,)).get
        return value == "1"

    def mark_tier_complete(self) -> bool:
        """Record that the tier covers every text, if it does (call under the writer lock)."""
        with self.transaction():
            if self.tier_complete():
                return True
            done = self.has_tier() and not self._db.execute(
                """SELECT 1 FROM chunks c WHERE c.embed_text IS NOT NULL
                     AND NOT EXISTS (SELECT 1 FROM tier_vectors t WHERE t.content_hash = c.content_hash) LIMIT 1""",
            ).fetchone()
            if done:
                self.set_meta({TIER_COMPLETE: "1"})
        return done

    def tier_coverage(self) -> tuple[int, int]:
        """(texts with a tier vector, texts to embed): distinct chunk texts."""
        total = self._db.execute("SELECT count(DISTINCT content_hash) FROM chunks WHERE embed_text IS NOT NULL").fetchone()
        if not self.has_tier():
            return 0, int(total[0]) if total else 0
        done = self._db.execute(
            """SELECT count(*) FROM tier_vectors t
               WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.content_hash = t.content_hash AND c.embed_text IS NOT NULL)""",
        ).fetchone()
        return (int(done[0]) if done else 0), (int(total[0]) if total else 0)

    def add_tier_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        with self.transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO tier_vectors(content_hash, vector) VALUES(?, ?)",
                [(_hash_key(h), np.asarray(v, np.float16).tobytes()) for h, v in zip(hashes, vectors, strict=True)],
            )

    def tier_texts_embedded(self) -> tuple[list[str], np.ndarray]:
        """(embedding text, float16 tier vector) of every distinct chunk text the tier covers, in
        content-hash order: the teacher's targets when a static model is trained on an index
        (scripts/static_training)."""
        if not self.has_tier():
            return [], np.empty((0, 0), np.float16)
        with self.read_snapshot():
            rows = cast(list[tuple[str, str | bytes | None, str, str | None, int, int, bytes]], self._db.execute(
                """SELECT c.embed_text, c.text, f.path, f.hash, c.text_at, c.text_len, t.vector
                   FROM chunks c JOIN files f ON f.id = c.file_id JOIN tier_vectors t ON t.content_hash = c.content_hash
                   WHERE c.embed_text IS NOT NULL GROUP BY c.content_hash ORDER BY c.content_hash""").fetchall())
        texts = [self._embedding_text(embed, stored, path, digest, at, length)
                 for embed, stored, path, digest, at, length, _ in rows]
        vectors = np.frombuffer(b"".join(r[6] for r in rows), np.float16).reshape(len(rows), -1) if rows else \
            np.empty((0, 0), np.float16)
        return texts, vectors

    def delete_orphan_tier_vectors(self) -> int:
        if not self.has_tier():
            return 0
        with self.transaction():
            self._db.execute(
                "DELETE FROM tier_vectors WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.content_hash = tier_vectors.content_hash)")
            return int(self._db.changes())

    def tier_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(chunk id of each row, float16 vectors): every chunk whose text has a tier vector."""
        if not self.has_tier():
            return np.empty(0, np.int64), np.empty((0, 0), np.float16)
        with self.read_snapshot():
            rows = self._db.execute(
                """SELECT c.id, t.vector FROM chunks c JOIN tier_vectors t ON t.content_hash = c.content_hash
                   ORDER BY c.id""").fetchall()
        if not rows:
            return np.empty(0, np.int64), np.empty((0, 0), np.float16)
        ids = np.fromiter((cast(int, r[0]) for r in rows), np.int64, len(rows))
        vectors = np.frombuffer(b"".join(cast(bytes, r[1]) for r in rows), np.float16).reshape(len(rows), -1)
        return ids, vectors

    # ---- the compact form (past QUANTIZE_FROM vectors) --------------------------------------

    def _compact(self) -> bool:
        return bool(self._db.execute("SELECT 1 FROM meta WHERE key = ? AND value = '1'", (COMPACT,)).fetchone())

    def _drop_compact(self) -> None:
        self._db.execute("DROP TABLE IF EXISTS vector_signs")
        self._db.execute("DROP TABLE IF EXISTS vector_codes")
        self._db.execute("DELETE FROM meta WHERE key = ?", (COMPACT,))
        self._staged_signs.clear()

    def _write_quantized(self, ids: np.ndarray, matrix: np.ndarray) -> None:
        codes, scales, norms = quantized.byte_codes(matrix)
        self._db.executemany(
            "INSERT OR REPLACE INTO vector_codes(id, scale, norm, codes) VALUES(?, ?, ?, ?)",
            [(int(i), float(s), float(n), c.tobytes()) for i, s, n, c in zip(ids, scales, norms, codes, strict=True)],
        )
        self._stage_signs(ids, quantized.sign_bytes(matrix))

    def _stage_signs(self, ids: np.ndarray, signs: np.ndarray | None) -> None:
        """Set the sign bits of these vector ids (None: mark them gone) in the pages this
        transaction writes at its commit: a file's vectors at a time would rewrite a page per file.
        A page is a bitmap of its live slots, then each slot's sign bytes."""
        width = self._sign_width()
        pages, slots = np.divmod(ids, SIGN_PAGE)
        for page in np.unique(pages).tolist():
            bits = self._staged_signs.get(page)
            if bits is None:
                row = self._db.execute("SELECT bits FROM vector_signs WHERE page = ?", (page,)).fetchone()
                bits = self._staged_signs[page] = bytearray(cast(bytes, row[0]) if row else bytes(_sign_page_bytes(width)))
            live, held = _sign_page(bits, width)
            on_page = pages == page
            held[slots[on_page]] = signs[on_page] if signs is not None else 0
            live[slots[on_page]] = signs is not None
            bits[:SIGN_PAGE // 8] = np.packbits(live).tobytes()

    def _dim(self) -> int:
        info = self.model()
        return 0 if info is None else info.dim

    def _sign_width(self) -> int:
        return -(-self._dim() // 64) * 8

    def _finish_vectors(self) -> None:
        """At a commit: write the staged sign pages, and quantize every vector once the index
        holds QUANTIZE_FROM of them."""
        if self._vectors_added and not self._compact() and self._crossed_quantize_from():
            self._make_compact()
        self._vectors_added = False
        if self._staged_signs:
            self._db.executemany("INSERT OR REPLACE INTO vector_signs(page, bits) VALUES(?, ?)",
                                 [(page, bytes(bits)) for page, bits in sorted(self._staged_signs.items())])
            self._staged_signs.clear()

    def _crossed_quantize_from(self) -> bool:
        # ids only grow past the count: most indexes never need the count(*)
        if int(self._db.execute("SELECT coalesce(max(id), 0) FROM embeddings").get) < quantized.QUANTIZE_FROM:
            return False
        return int(self._db.execute("SELECT count(*) FROM embeddings").get) >= quantized.QUANTIZE_FROM

    def _make_compact(self) -> None:
        """Switch to the compact form: every vector quantized, every chunk text compressed."""
        self._db.execute(_COMPACT_SCHEMA)
        last = 0
        while True:
            ids, matrix = self.vectors_after(last, QUANTIZE_PAGE)
            if not len(ids):
                break
            self._write_quantized(ids, matrix)
            last = int(ids[-1])
        last = 0
        while rows := self._db.execute(
            """SELECT c.id, c.text, f.path, f.hash, c.start_line, c.end_line FROM chunks c JOIN files f ON f.id = c.file_id
               WHERE c.id > ? ORDER BY c.id LIMIT ?""", (last, QUANTIZE_PAGE)
        ).fetchall():
            self._db.executemany("UPDATE chunks SET text = ?, text_at = ?, text_len = ? WHERE id = ?",
                                 self._compacted_texts(rows))
            last = cast(int, rows[-1][0])
        self.set_meta({COMPACT: "1"})
        self._turned_compact = True
        # from here on the codes are the vectors: the float32 copy (1.34 GB on the kernel) goes
        self._db.execute("DROP TABLE vec_chunks")
        self._db.execute(f"CREATE VIRTUAL TABLE vec_chunks USING vec0(embedding float[{self._dim()}] distance_metric=cosine)")

    def _give_back_free_pages(self, repack: bool = False) -> None:
        """Shrink the file by the pages nothing holds (`repack`: rewrite it whole); an index that
        cannot (a full disk, or one without auto_vacuum) stays as it is, only larger."""
        try:
            if repack:
                self._db.execute("VACUUM")
            else:
                self._db.execute("PRAGMA incremental_vacuum").fetchall()  # a page a step: run to the end
        except apsw.Error as exc:
            log.warning("the index's free pages were not given back: %s", exc)

    def _repack(self) -> None:
        """Pack the pages the compact switch left part empty: its chunk texts were rewritten in
        place about 2.4x smaller, and SQLite reuses no room in a page that only later ids would
        fill (the kernel: 0.14 GB of its chunks' pages empty). Done once, just after the switch,
        while the index holds about QUANTIZE_FROM chunks; an index that cannot be
        repacked (a full disk) stays as it is, only larger."""
        try:
            self._db.execute("VACUUM")
        except apsw.Error as exc:
            log.warning("the index was not repacked after turning compact: %s", exc)

    def _compacted_texts(self, rows: Sequence[tuple[Any, ...]]) -> list[tuple[object, ...]]:
        """(text, text_at, text_len, id) of chunk rows (id, text, path, file digest, start line,
        end line) written before the index turned compact: each text's place in its file when the
        file still holds it, else the text compressed. Each file is read once a page."""
        sources: dict[str, tuple[str, list[int]] | None] = {}
        out: list[tuple[object, ...]] = []
        for cid, text, path, digest, start, end in rows:
            if not isinstance(text, str):
                continue
            if path not in sources:
                source = self.sources.file_text(path, digest) if self.sources is not None else None
                sources[path] = (source, line_starts(source)) if source is not None else None
            held = sources[path]
            at = text_offset(held[0], held[1], text, start, end) if held is not None else -1
            out.append((*_stored_text(text, at, compact=True), cid))
        return out

    # ---- keyword postings without positions (a large index; kept_postings.py) --------------

    def _kept_through(self) -> int:
        """The largest chunk id whose keyword rows moved to the kept postings; 0: none moved."""
        return self._kept_through_of(self._db)

    def _move_keywords_if_due(self) -> None:
        """At a commit: move FTS5's rows to the kept postings once FOLD_CHUNKS chunks were written
        since the last move (at once when the index has just turned compact), in an index that is
        compact, moved before, or is a large first build (`expect_files`)."""
        through = self._kept_through()
        if not (through or self._pending is not None or self._compact()):
            return  # an index that never moved: FTS5 alone (every small one)
        last = int(self._db.execute("SELECT coalesce(max(id), 0) FROM chunks").get)
        if last - through >= FOLD_CHUNKS or (self._turned_compact and last > through):
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
        if not SqliteStore._kept_through_of(db):
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
        if not SqliteStore._kept_through_of(db):
            return np.empty(0, np.int64), np.empty(0, np.int32)
        pages = [kept_postings.sparse_page(cast(bytes, blob)) for (blob,) in db.execute(
            "SELECT lengths FROM kept_lengths WHERE tab = 1 ORDER BY page")]
        if not pages:
            return np.empty(0, np.int64), np.empty(0, np.int32)
        return np.concatenate([d for d, _ in pages]), np.concatenate([n for _, n in pages])

    @staticmethod
    def _kept_through_of(db: apsw.Connection) -> int:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (KEPT_THROUGH,)).fetchone()
        return int(row[0]) if row else 0

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

    def vector_count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM embeddings").get)

    def vector_count_after(self, after_id: int) -> int:
        return int(self._db.execute("SELECT count(*) FROM embeddings WHERE id > ?", (after_id,)).get)

    def vectors_after(self, after_id: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, float32 matrix) of up to `limit` stored vectors whose id is above `after_id`, in
        id order: what a warm reader adds to the vectors it holds, a page at a time."""
        info = self.model()
        if info is None:
            return np.empty(0, np.int64), np.empty((0, 0), np.float32)
        if self._compact():  # the byte codes are all the index keeps: about the vectors
            ids, held = self._codes_after(after_id, limit)
            return ids, held.codes.astype(np.float32) * held.scales[:, None]
        # paged through the embeddings' key: vec0 itself answers `rowid > ? ORDER BY rowid` by a
        # scan (1 s a page on the kernel; 0.25 s this way)
        rows = self._db.execute("""SELECT v.rowid, v.embedding FROM embeddings e JOIN vec_chunks v ON v.rowid = e.id
                                   WHERE e.id > ? ORDER BY e.id LIMIT ?""", (after_id, limit)).fetchall()
        ids = np.fromiter((cast(int, r[0]) for r in rows), np.int64, len(rows))
        blobs = b"".join(cast(bytes, r[1]) for r in rows)
        return ids, np.frombuffer(blobs, np.float32).reshape(len(rows), info.dim)

    def vector_ids(self) -> np.ndarray:
        """The ids of every stored vector (a warm reader drops those no chunk uses any more)."""
        return np.fromiter((int(cast(int, i)) for (i,) in self._db.execute("SELECT id FROM embeddings")), np.int64)

    def chunks_of_vectors(self, ids: Sequence[int]) -> list[tuple[int, int]]:
        """(vector id, chunk id) of every chunk whose text has one of these vectors."""
        wanted = [int(i) for i in ids]
        # a search's few ids as parameters (half the time of json_each), a long list as JSON
        listed = ",".join("?" * len(wanted)) if len(wanted) <= _LISTED_IDS else "SELECT value FROM json_each(?)"
        return [(int(e), int(c)) for e, c in self._db.execute(
            f"""SELECT e.id, c.id FROM embeddings e JOIN chunks c ON c.content_hash = e.content_hash
               WHERE e.id IN ({listed})""",
            wanted if len(wanted) <= _LISTED_IDS else (json.dumps(wanted),),
        )]

    def vector_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the nearest chunks, best first."""
        if self.model() is None:
            return []
        blob = np.asarray(query, np.float32).tobytes()
        if self._compact():
            with self.read_snapshot():
                return self._quantized_search(np.asarray(query, np.float32), limit, filters)
        if filters.is_empty():
            # KNN over distinct texts, then every chunk holding that text.
            sql = """WITH knn AS (SELECT rowid, distance FROM vec_chunks WHERE embedding MATCH ? AND k = ?)
                     SELECT c.id, knn.distance FROM knn JOIN embeddings e ON e.id = knn.rowid
                     JOIN chunks c ON c.content_hash = e.content_hash ORDER BY knn.distance, c.id LIMIT ?"""
            params: tuple[object, ...] = (blob, limit, limit)
        else:
            where, fparams = self._filter(filters)
            sql = f"""SELECT c.id, vec_distance_cosine(v.embedding, ?) AS distance
                      FROM chunks c JOIN files f ON f.id = c.file_id
                      JOIN embeddings e ON e.content_hash = c.content_hash JOIN vec_chunks v ON v.rowid = e.id
                      WHERE 1{where} ORDER BY distance, c.id LIMIT ?"""
            params = (blob, *fparams, limit)
        try:
            rows = self._db.execute(sql, params).fetchall()
        except apsw.SQLError as exc:
            raise ModelError(f"vector search failed ({exc})", "run `codewhere index --rebuild`") from exc
        return [(int(cid), 1.0 - float(distance)) for cid, distance in cast(list[tuple[int, float]], rows)]

    def _quantized_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[tuple[int, float]]:
        """What `WarmVectors.search` answers over quantized vectors, read from disk: the sign
        pages in one pass, the byte codes of the shortlist by id. With filters, only the texts
        of chunks they let through are candidates, and only those chunks answer."""
        alive, signs = self._sign_pages()
        chunks_of: dict[int, list[int]] | None = None
        if not filters.is_empty():
            where, params = self._filter(filters)
            chunks_of = grouped(self._db.execute(
                f"""SELECT e.id, c.id FROM chunks c JOIN files f ON f.id = c.file_id
                    JOIN embeddings e ON e.content_hash = c.content_hash WHERE 1{where}""", params))
            allowed = np.zeros(len(alive), bool)
            allowed[[i for i in chunks_of if i < len(alive)]] = True
            alive &= allowed
        k = min(limit, int(alive.sum()))
        if k <= 0:
            return []
        query_words = quantized.sign_words(quantized.sign_bytes(query[None, :]))[:, 0]
        # the words of each vector left where they lie (a strided pass per word beats a transposed copy)
        rows = quantized.shortlist(signs.view(np.uint64).T, query_words, quantized.shortlist_size(k), alive)
        ids, held = self._coded(self._db.execute(
            "SELECT id, scale, norm, codes FROM vector_codes WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
            (json.dumps(rows.tolist()),),
        ).fetchall())
        nearest, distances = quantized.by_codes(ids, held.codes, held.scales, held.norms, query, k)
        by_vector = dict(zip(nearest.tolist(), distances.tolist(), strict=True))
        pairs = (self.chunks_of_vectors(list(by_vector)) if chunks_of is None
                 else [(vid, cid) for vid in by_vector for cid in chunks_of[vid]])
        return nearest_chunks(by_vector, pairs, limit)

    def _sign_pages(self, first: int = 0, last: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(live, sign bytes) of every vector slot of the pages `first` to `last` (default: the
        last page), slot 0 being page `first`'s first; each page copied once into its place."""
        width = self._sign_width()
        pages = self._db.execute("SELECT page, bits FROM vector_signs WHERE page >= ? AND page <= coalesce(?, page) ORDER BY page",
                                 (first, last)).fetchall()
        count = (cast(int, pages[-1][0]) + 1 - first if last is None else last + 1 - first) if pages else 0
        live, signs = np.zeros((count, SIGN_PAGE // 8), np.uint8), np.zeros((count, SIGN_PAGE * width), np.uint8)
        for page, bits in pages:
            raw = np.frombuffer(cast(bytes, bits), np.uint8)
            live[cast(int, page) - first], signs[cast(int, page) - first] = raw[:SIGN_PAGE // 8], raw[SIGN_PAGE // 8:]
        return np.unpackbits(live, axis=1).astype(bool).reshape(-1), signs.reshape(count * SIGN_PAGE, width)

    def _coded(self, rows: list[tuple[object, ...]]) -> tuple[np.ndarray, quantized.QuantizedVectors]:
        """(ids, byte codes with scales and norms; no sign bits) of `vector_codes` rows."""
        ids = np.fromiter((cast(int, r[0]) for r in rows), np.int64, len(rows))
        scales = np.fromiter((cast(float, r[1]) for r in rows), np.float32, len(rows))
        norms = np.fromiter((cast(float, r[2]) for r in rows), np.float32, len(rows))
        codes = np.frombuffer(b"".join(cast(bytes, r[3]) for r in rows), np.int8).reshape(len(rows), self._dim())
        return ids, quantized.QuantizedVectors(np.empty((0, len(rows)), np.uint64), codes, scales, norms)

    def quantized_after(self, after_id: int, limit: int) -> tuple[np.ndarray, quantized.QuantizedVectors] | None:
        """(ids, quantized vectors) of up to `limit` vectors above `after_id`, in id order, as the
        index stores them; None when it stores none (below QUANTIZE_FROM vectors)."""
        if not self._compact():
            return None
        with self.read_snapshot():
            ids, held = self._codes_after(after_id, limit)
            first = int(ids[0]) // SIGN_PAGE if len(ids) else 0
            _, signs = self._sign_pages(first, int(ids[-1]) // SIGN_PAGE if len(ids) else first)
        words = quantized.sign_words(signs[ids - first * SIGN_PAGE])
        return ids, quantized.QuantizedVectors(words, held.codes, held.scales, held.norms)

    def _codes_after(self, after_id: int, limit: int) -> tuple[np.ndarray, quantized.QuantizedVectors]:
        return self._coded(self._db.execute(
            "SELECT id, scale, norm, codes FROM vector_codes WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit)
        ).fetchall())

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
            if self._pending is not None and last - through >= SETTLE_CHUNKS:
                with self.transaction():  # a large build's last rows, moved too: FTS5 is left with edits only
                    self._move_keywords(last)
                self._give_back_free_pages()
        elif size >= HOLD_FROM_BYTES and self._pending is None and not self._kept_through() \
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

    # ---- the code graph ------------------------------------------------------------------

    def resolution_inputs(
        self, names: Sequence[str] | None = None, paths: Sequence[str] = ()
    ) -> tuple[Iterable[EdgeRow], list[SymbolRef], set[tuple[int, str]]]:
        """Every edge, every symbol (id, file, name, kind) and every (file, imported name); or,
        given `names`, only the edges naming one of them or lying in one of `paths`, with the
        symbols and imports those edges can resolve to. Every edge is read page by page, in id
        order, as it is consumed (the caller may update edges between pages)."""
        edge_sql = f"""SELECT e.id, e.file_id, e.kind, e.target_name, coalesce(s.parent, '')
                       FROM edges e LEFT JOIN symbols s ON s.id = e.source_id WHERE NOT {KEPT_PRECISE}"""
        if names is None:
            edges: Iterable[EdgeRow] = self._edge_pages(edge_sql)
            symbols = list(map(SymbolRef._make, self._db.execute("SELECT id, file_id, name, kind, parent FROM symbols")))
            imported = {(f, n) for f, n in self._db.execute("SELECT file_id, target_name FROM edges WHERE kind = 'import'")}
            return edges, symbols, imported
        edges = [EdgeRow(*r) for r in self._db.execute(
            edge_sql + """ AND (e.name_id IN (SELECT m.id FROM names m JOIN json_each(?1) j ON m.name = j.value)
                           OR e.file_id IN (SELECT f.id FROM files f JOIN json_each(?2) j ON f.path = j.value))""",
            (json.dumps(sorted(names)), json.dumps(list(paths))),
        )]
        wanted = json.dumps(sorted({e.target_name for e in edges}))
        files = json.dumps(sorted({e.file_id for e in edges}))
        symbols = [SymbolRef(*r) for r in self._db.execute(
            "SELECT id, file_id, name, kind, parent FROM symbols WHERE name IN (SELECT value FROM json_each(?))", (wanted,)
        )]
        imported = {(f, n) for f, n in self._db.execute(
            "SELECT file_id, target_name FROM edges WHERE kind = 'import' AND file_id IN (SELECT value FROM json_each(?))",
            (files,),
        )}
        return edges, symbols, imported

    def _edge_pages(self, edge_sql: str) -> Iterator[EdgeRow]:
        after, page = 0, EDGE_PAGE
        while True:
            rows = list(map(EdgeRow._make, self._db.execute(f"{edge_sql} AND e.id > ? ORDER BY e.id LIMIT ?", (after, page))))
            yield from rows
            if len(rows) < page:
                return
            after = rows[-1].id

    def edge_sites(self, paths: Sequence[str] | None = None) -> list[EdgeSite]:
        sql = "SELECT e.id, f.path, e.line, e.target_name, e.kind FROM edges e JOIN files f ON f.id = e.file_id"
        if paths is None:
            return [EdgeSite(*r) for r in self._db.execute(sql)]
        return [EdgeSite(*r) for r in self._db.execute(
            sql + " WHERE f.path IN (SELECT value FROM json_each(?))", (json.dumps(list(paths)),))]

    def resolved_edges(self) -> list[tuple[EdgeSite, int | None, str]]:
        """Every edge with its target and resolution: what a comparison of graphs reads."""
        return [(EdgeSite(*r[:5]), r[5], r[6]) for r in self._db.execute(
            """SELECT e.id, f.path, e.line, e.target_name, e.kind, e.target_id, e.resolution
               FROM edges e JOIN files f ON f.id = e.file_id""")]

    def resolution_counts(self, resolution: str) -> dict[str, int]:
        """Edges resolved by `resolution`, per file."""
        return dict(self._db.execute(
            """SELECT f.path, count(*) FROM edges e JOIN files f ON f.id = e.file_id WHERE e.resolution = ?
               GROUP BY f.path""", (resolution,)))

    def symbol_spans(self, paths: Sequence[str]) -> list[SymbolSpan]:
        return [SymbolSpan(*r) for r in self._db.execute(
            """SELECT s.id, f.path, s.name, s.start_line, s.end_line FROM symbols s JOIN files f ON f.id = s.file_id
               WHERE f.path IN (SELECT value FROM json_each(?))""", (json.dumps(list(paths)),))]

    def set_edge_targets(self, rows: Iterable[tuple[int, int | None, str]]) -> None:
        self._db.executemany(
            "UPDATE edge_rows SET target_id = ?, resolution = ? WHERE id = ?",
            [(t, RESOLUTION_CODES[r], i) for i, t, r in rows],
        )

    _SYMBOL_COLUMNS = """s.id, f.path, s.name, s.qualified_name, s.kind, s.start_line, s.end_line, s.signature,
                         s.doc, s.parent, f.language"""

    def _filter(self, filters: Filters) -> tuple[str, list[object]]:
        return _filter_sql(filters, "f", self.repo)

    def _symbol_rows(self, where: str, params: Sequence[object]) -> list[SymbolRow]:
        sql = f"SELECT {self._SYMBOL_COLUMNS} FROM symbols s JOIN files f ON f.id = s.file_id WHERE {where}"
        return [SymbolRow(*r) for r in self._db.execute(sql, params)]

    def symbols_named(self, name: str) -> list[SymbolRow]:
        return self._symbol_rows("s.name = ? ORDER BY f.path, s.start_line", (name,))

    def symbols_qualified(self, qualified: str) -> list[SymbolRow]:
        return self._symbol_rows(
            "(s.qualified_name = ? OR s.qualified_name LIKE ? ESCAPE '\\') ORDER BY f.path, s.start_line",
            (qualified, "%." + like_escape(qualified)),
        )

    def symbols_at(self, path: str, line: int) -> list[SymbolRow]:
        """Symbols whose span holds the line, innermost first."""
        return self._symbol_rows(
            "f.path = ? AND s.start_line <= ? AND s.end_line >= ? ORDER BY s.start_line DESC, s.end_line ASC",
            (path, line, line),
        )

    def symbols_by_id(self, ids: Sequence[int]) -> dict[int, SymbolRow]:
        if not ids:
            return {}
        rows = self._symbol_rows(f"s.id IN ({','.join('?' * len(ids))})", list(ids))
        return {r.id: r for r in rows}

    def outline(self, path: str) -> list[SymbolRow]:
        return self._symbol_rows("f.path = ? ORDER BY s.start_line, s.end_line DESC", (path,))

    def symbol_search(self, query: TermQuery, limit: int) -> list[SymbolRow]:
        """Symbols whose name tokens match the query, best BM25 first."""
        match = fts5_expression(query)
        sql = f"""SELECT {self._SYMBOL_COLUMNS} FROM symbols_fts JOIN symbols s ON s.id = symbols_fts.rowid
                  JOIN files f ON f.id = s.file_id WHERE symbols_fts MATCH ?
                  ORDER BY bm25(symbols_fts, 4.0, 2.0, 1.0), f.path LIMIT ?"""
        try:
            return [SymbolRow(*r) for r in self._db.execute(sql, (match, limit))]
        except apsw.SQLError as exc:
            raise QueryError(f"the symbol query could not run ({exc})", "remove unusual punctuation") from exc

    def edges_to(self, symbol_ids: Sequence[int], kinds: Sequence[str]) -> list[EdgeHit]:
        """Edges resolved to any of the symbols (who calls / imports / extends them)."""
        if not symbol_ids:
            return []
        sql = f"""SELECT e.kind, e.source_id, e.target_id, e.target_name, e.resolution, f.path, e.line
                  FROM edges e JOIN files f ON f.id = e.file_id
                  WHERE e.target_id IN ({','.join('?' * len(symbol_ids))}) AND e.kind IN ({','.join('?' * len(kinds))})
                  ORDER BY f.path, e.line"""
        return [EdgeHit(*r) for r in self._db.execute(sql, (*symbol_ids, *kinds))]

    def unresolved_edges_named(self, name: str, kinds: Sequence[str]) -> list[EdgeHit]:
        """Edges to `name` that resolution could not pin to one symbol (ambiguous or external)."""
        sql = f"""SELECT e.kind, e.source_id, e.target_id, e.target_name, e.resolution, f.path, e.line
                  FROM edges e JOIN files f ON f.id = e.file_id
                  WHERE e.target_name = ? AND e.target_id IS NULL AND e.kind IN ({','.join('?' * len(kinds))})
                  ORDER BY f.path, e.line"""
        return [EdgeHit(*r) for r in self._db.execute(sql, (name, *kinds))]

    def edges_from(self, symbol_id: int, kinds: Sequence[str]) -> list[EdgeHit]:
        sql = f"""SELECT e.kind, e.source_id, e.target_id, e.target_name, e.resolution, f.path, e.line
                  FROM edges e JOIN files f ON f.id = e.file_id
                  WHERE e.source_id = ? AND e.kind IN ({','.join('?' * len(kinds))}) ORDER BY e.line"""
        return [EdgeHit(*r) for r in self._db.execute(sql, (symbol_id, *kinds))]

    def edge_sources(self, target_ids: Sequence[int], kinds: Sequence[str]) -> list[EdgeSource]:
        """Each `kinds` edge into the symbols, by path and line."""
        out: list[EdgeSource] = []
        for at in range(0, len(target_ids), 500):
            part = target_ids[at : at + 500]
            sql = edge_sources_sql(",".join("?" * len(part)), ",".join("?" * len(kinds)))
            out += [EdgeSource(*r) for r in self._db.execute(sql, (*part, *kinds))]
        return out if len(target_ids) <= 500 else sorted(out, key=lambda r: (r.path, r.line))

    def graph_stats(self) -> dict[str, object]:
        by_resolution = dict(self._db.execute("SELECT kind || ':' || resolution, count(*) FROM edges GROUP BY 1"))
        per_language: dict[str, dict[str, dict[str, int]]] = {}
        for language, kind, resolution, n in self._db.execute(
            """SELECT f.language, e.kind, e.resolution, count(*) FROM edges e JOIN files f ON f.id = e.file_id
               GROUP BY 1, 2, 3"""
        ):
            per_language.setdefault(language, {}).setdefault(kind, {})[resolution] = n
        symbols = dict(self._db.execute("SELECT kind, count(*) FROM symbols GROUP BY 1"))
        return {"symbols": symbols, "edges": by_resolution, "per_language": per_language}

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

    # ---- what a warm reader reads (store/warm.py) -----------------------------------------

    def change_token(self) -> object:
        # data_version moves when another connection commits, total_changes when this one writes
        return self._db.execute("PRAGMA data_version").get, self._db.total_changes(), self._swaps

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        with self._use, self._db:
            yield

    def file_chunk_ranges(self) -> dict[int, tuple[object, ...]]:
        return {file_id: tuple(held) for file_id, *held in self._db.execute(_FILE_CHUNKS_SQL)}

    def rows_of_files(self, file_ids: Sequence[int] | None) -> Iterator[tuple[int, ChunkRow]]:
        batches: list[tuple[str, Sequence[int]]]
        if file_ids is None:
            batches = [(_CANDIDATE_SQL, ())]
        else:
            batches = [(f"{_CANDIDATE_SQL} WHERE c.file_id IN ({','.join('?' * len(part))})", part)
                       for part in (file_ids[i : i + 500] for i in range(0, len(file_ids), 500))]
        for sql, params in batches:
            cursor = self._db.execute(sql, params)
            while page := list(itertools.islice(cursor, ROW_PAGE)):  # a page at a time: never the whole index as one list
                yield from self._chunk_rows(page)

    def chunk_rows(self, ids: Sequence[int], filters: Filters) -> dict[int, ChunkRow]:
        """The chunks the filters let through, with the names they define and mention."""
        if not ids:
            return {}
        where, params = self._filter(filters)
        out: dict[int, ChunkRow] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            rows = self._db.execute(f"{_CANDIDATE_SQL} WHERE c.id IN ({','.join('?' * len(part))}){where}", (*part, *params))
            out.update((row.chunk_id, row) for _, row in self._chunk_rows(rows.fetchall()))
        return out

    def _chunk_rows(self, rows: list[tuple[Any, ...]]) -> list[tuple[int, ChunkRow]]:
        """(file id, chunk) of _CANDIDATE_SQL rows, with the texts a compact index cut from their files."""
        cut = [i for i, row in enumerate(rows) if row[_TEXT] is None]
        texts = self._cut_texts([(rows[i][_PATH], rows[i][_FILE_HASH], rows[i][_TEXT_AT], rows[i][_TEXT_LEN]) for i in cut])
        for i, text in zip(cut, texts, strict=True):
            rows[i] = (*rows[i][:_TEXT], text, *rows[i][_TEXT + 1 :])
        return [(int(row[_FILE_ID]), chunk_row(row)) for row in rows]

    def _row_text(self, stored: str | bytes | None, path: str, digest: str | None, at: int, length: int) -> str:
        """A chunk's text from its row: kept (compressed or not), or cut from its file."""
        return chunk_text(stored) if stored is not None else self._cut_texts([(path, digest, at, length)])[0]

    def _cut_texts(self, wanted: Sequence[tuple[str, str | None, int, int]]) -> list[str]:
        """The texts of chunks a compact index cut from their files, by (path, file digest, start,
        length): empty for a file that changed since it was indexed, or one this process cannot read."""
        if not wanted:
            return []
        if self.sources is None:
            return [""] * len(wanted)
        return [text or "" for text in self.sources.slices(wanted)]

    def call_target_chunks(self, chunk_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
        """For each chunk, the chunks holding the definitions its resolved calls point at, with how
        each call was resolved."""
        if not chunk_ids:
            return {}
        return targets_with_resolution(self._db.execute(
            f"{_CALL_TARGETS_SQL} AND e.chunk_id IN ({','.join('?' * len(chunk_ids))})", list(chunk_ids)
        ))

    def chunks_defining_names(
        self, names: Sequence[str], filters: Filters, spelled: Sequence[str] = ()
    ) -> dict[str, list[int]]:
        """Chunks defining each compound name, by id. A name that `spelled` holds as written
        (`Helpers`) is defined only where it is spelled so: `module Helpers`, not `def helpers`."""
        if not names:
            return {}
        where, params = self._filter(filters)
        keys = spelled_keys(names, spelled)
        exact = (f" AND (d.name NOT IN ({','.join('?' * len(keys))}) OR d.spelled IN ({','.join('?' * len(spelled))}))"
                 if keys else "")
        exact_params = [*keys, *spelled] if keys else []
        rows = self._db.execute(
            f"""SELECT DISTINCT d.name, c.id FROM definitions d JOIN chunks c ON c.id = d.chunk_id
                JOIN files f ON f.id = c.file_id WHERE d.name IN ({','.join('?' * len(names))}){exact}{where}
                ORDER BY c.id""",
            (*names, *exact_params, *params),
        )
        return grouped(rows)

    def chunk_at(self, path: str, line: int) -> ChunkAt | None:
        """The smallest chunk of `path` whose lines hold `line`."""
        vector = ("(SELECT v.embedding FROM embeddings e JOIN vec_chunks v ON v.rowid = e.id "
                  "WHERE e.content_hash = c.content_hash)") if self.model() is not None else "NULL"
        row = self._db.execute(
            f"""SELECT c.id, c.embed_text, c.text, {vector}, c.text_at, c.text_len, f.hash FROM chunks c
               JOIN files f ON f.id = c.file_id WHERE f.path = ? AND c.start_line <= ? AND c.end_line >= ?
               ORDER BY c.end_line - c.start_line LIMIT 1""",
            (path, line, line),
        ).fetchone()
        if not row:
            return None
        embed_text = self._embedding_text(row[1], row[2], path, row[6], row[4], row[5])
        return ChunkAt(int(row[0]), embed_text, np.frombuffer(row[3], np.float32) if row[3] is not None else None)

    def chunk_spans(self, filters: Filters) -> list[tuple[str, int, int]]:
        """(path, start line, end line) of every chunk the filters let through."""
        where, params = self._filter(filters)
        return cast(list[tuple[str, int, int]], self._db.execute(
            f"SELECT f.path, c.start_line, c.end_line FROM chunks c JOIN files f ON f.id = c.file_id WHERE 1{where}",
            params,
        ).fetchall())

    def indexed_paths(self, filters: Filters) -> list[str]:
        where, params = self._filter(filters)
        return [r[0] for r in self._db.execute(f"SELECT f.path FROM files f WHERE f.skip_reason IS NULL{where}", params)]

    def repositories(self) -> list[str]:
        return [self.repo]

    def stats(self) -> StoreStats:
        db = self._db
        files, size = db.execute("SELECT count(*), coalesce(sum(size), 0) FROM files WHERE skip_reason IS NULL").get
        chunks = db.execute("SELECT count(*) FROM chunks").get
        skipped = dict(db.execute("SELECT skip_reason, count(*) FROM files WHERE skip_reason IS NOT NULL GROUP BY 1"))
        kinds = dict(db.execute("SELECT kind, count(*) FROM files WHERE skip_reason IS NULL GROUP BY 1"))
        langs = dict(db.execute("SELECT language, count(*) FROM files WHERE skip_reason IS NULL GROUP BY 1 ORDER BY 2 DESC"))
        return StoreStats(files, chunks, size, skipped, kinds, langs, self.meta())
