"""The SQLite index's layout and what every layer of its store shares: constants, schema, codes,
error mapping, SQL helpers."""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from codewhere.errors import (
    CodewhereError,
    IndexFileError,
    IndexNotWritableError,
    QueryInterrupted,
)
from codewhere.store.base import (
    CHUNK_ROW_COLUMNS,
    DEFINITION_SEPARATOR,
    like_escape,
)
from codewhere.types import (
    Filters,
    TermQuery,
)

log = logging.getLogger(__name__)

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
        def guarded(self: Any, *args: object, **kwargs: object) -> object:
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
