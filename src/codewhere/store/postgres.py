"""The team index: many repositories in one PostgreSQL database, vectors in pgvector.

Everything lives in the `codewhere` schema of the database, so the database can hold other
things too. A repository is a row; files, chunks, symbols and edges belong to one. Vectors are
shared across repositories (one per distinct chunk text, as in the SQLite store), so every
repository in a database uses the same model.

Keyword ranking is PostgreSQL's `ts_rank` over the same identifier-split tokens the SQLite store
gives FTS5; `ts_rank` has no inverse document frequency, so rare words count no more than common
ones (README and BENCHMARKS show what that costs).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import re
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import numpy as np
import psycopg
from psycopg import sql

from codewhere.config import redact_dsn
from codewhere.errors import (
    IndexBusyError,
    IndexFileError,
    ModelError,
    QueryError,
    QueryInterrupted,
)
from codewhere.store.base import (
    CHUNK_ROW_COLUMNS,
    DEFINITION_SEPARATOR,
    KEPT_PRECISE,
    ChunkAt,
    EdgeSource,
    FileStamp,
    FileState,
    ReplicaLag,
    Route,
    StoreStats,
    chunk_row,
    definition_rows,
    edge_sources_sql,
    grouped,
    like_escape,
    path_bounds,
    smallest_chunk_by_line,
    spelled_keys,
    targets_with_resolution,
    unit_columns,
)
from codewhere.store.pg_schema import (
    LOCK_NAMESPACE,
    MIGRATION_LOCK,
    PARTITIONED,
    SCHEMA,
    SCHEMA_VERSION,
    count_words,
    create_partitions,
    drop_partitions,
    first_id,
    migrate_step,
    orphan_partitions,
    partition_name,
    repositories_of,
    size_vector_column,
)
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

CONNECT_TIMEOUT_SECONDS = 10
# ts_rank weights for D, C, B, A of a symbol's fields (chunks take theirs from the query's
# field_weights: the path is B, the text A)
RANK_WEIGHTS = "{0, 0.1, 0.5, 1.0}"
RANK_NORMALISATION = 1  # divide by 1 + log(document length): long chunks don't win by size
MODEL_KEYS = ("model_id", "model_dim", "model_fingerprint")  # the database's model, in `settings`
ANALYZE_AFTER_ROWS = 1000  # chunks written by one indexer run after which its partitions get fresh statistics
HNSW_OVERFETCH = 10  # a filtered KNN asks the HNSW index for this many times the rows, then filters
ROUTE_K1, ROUTE_B = 1.2, 0.75  # BM25's usual saturation and length weight, for routing a search to repositories

FILE_FTS_CHARS = 500_000  # of a file's body tokens: a tsvector holds at most 1 MB

# with the partition key: the targets' repositories are read, no other
_EDGE_SOURCES_SQL = edge_sources_sql(
    "SELECT unnest(%(targets)s::bigint[])", "SELECT unnest(%(kinds)s::text[])", "f.repo_id = e.repo_id AND f.id = e.file_id",
    "e.repo_id = ANY(%(repos)s) AND f.repo_id = ANY(%(repos)s) AND ")

# a chunk as search reads it (types.ChunkRow), with its file id last; the repositories it may be in
# are named for each partitioned table (definitions, files, chunks), so the planner reads only theirs
_CHUNK_ROW_SQL = "SELECT " + CHUNK_ROW_COLUMNS.format(
    repo="r.name",
    definitions="""(SELECT string_agg(d.name || %s || d.spelled, %s) FROM definitions d
                     WHERE d.repo_id = ANY(%s) AND d.repo_id = c.repo_id AND d.chunk_id = c.id)""",
) + """ FROM chunks c JOIN files f ON f.repo_id = c.repo_id AND f.id = c.file_id JOIN repos r ON r.id = c.repo_id
          WHERE f.repo_id = ANY(%s) AND c.repo_id = ANY(%s)"""
_CHUNK_ROW_PARAMS = (DEFINITION_SEPARATOR, DEFINITION_SEPARATOR)
_CALL_TARGETS_SQL = """SELECT DISTINCT e.chunk_id, s.chunk_id, e.resolution
                       FROM edges e JOIN symbols s ON s.repo_id = e.repo_id AND s.id = e.target_id
                       WHERE e.kind = 'call' AND s.chunk_id IS NOT NULL AND s.chunk_id <> e.chunk_id"""


_SYMBOL_COLUMNS = """s.id, f.path, s.name, s.qualified_name, s.kind, s.start_line, s.end_line, s.signature,
                     s.doc, s.parent, f.language"""
_EDGE_COLUMNS = "e.kind, e.source_id, e.target_id, e.target_name, e.resolution, f.path, e.line"


def first_line(exc: BaseException) -> str:
    """psycopg's messages run over several lines (DETAIL, HINT); an error line shows the first."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def tsquery_text(query: TermQuery) -> str:
    """A `to_tsquery('simple', …)` argument: each term quoted, so no user text is operator syntax."""
    words = [w for term in query.terms for w in re.findall(r"\w+", term.lower())]
    quoted = ["'" + w.replace("'", "''") + "'" for w in words]
    joiner = {"all": " & ", "phrase": " <-> "}.get(query.match, " | ")
    return joiner.join(quoted)


def _storable(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows PostgreSQL can hold: its text type refuses NUL, which a text file may still contain
    past the bytes the scanner sniffs; each becomes U+FFFD (lines and columns stay where they were)."""
    return [tuple(v.replace("\x00", "\ufffd") if isinstance(v, str) and "\x00" in v else v for v in row) for row in rows]


def _vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(map(repr, np.asarray(vector, np.float32).astype(float).tolist())) + "]"


def _lost_connection_is_one_line(cls: type) -> type:
    """A server that restarts or drops the connection mid-command is an operational fact, not a
    bug: every public method turns psycopg's OperationalError into an IndexFileError. A reader
    outside a snapshot tries once more on a new connection first: with a multi-host read DSN that
    is the next server (a replica that died is skipped)."""

    def guard(method: Callable[..., object]) -> Callable[..., object]:
        @functools.wraps(method)
        def guarded(self: PostgresStore, *args: object, **kwargs: object) -> object:
            try:
                try:
                    return method(self, *args, **kwargs)
                except psycopg.OperationalError:
                    if not self._lost() or not self._may_retry():
                        raise
                    log.info("lost the read connection to %s; reconnecting", redact_dsn(self.read_dsn or self.dsn))
                    return method(self, *args, **kwargs)
            except psycopg.errors.QueryCanceled as exc:
                raise QueryInterrupted("the call was stopped before it finished (time limit, or cancelled)",
                                       "ask for less: a smaller --depth, a narrower --scope, or a more specific name") from exc
            except psycopg.OperationalError as exc:
                if not self._lost():  # the server answered: out of memory or lock slots, too many connections
                    raise IndexFileError(f"PostgreSQL at {redact_dsn(self._connected_dsn())} refused: {first_line(exc)}",
                                         exc.diag.message_hint or "see the server's log") from exc
                self._drop_reader()  # the next call connects again
                raise IndexFileError(
                    f"lost the connection to PostgreSQL at {redact_dsn(self._connected_dsn())}: {first_line(exc)}",
                    "check that the server is up, then run the command again",
                ) from exc

        return guarded

    for name, member in list(vars(cls).items()):
        if inspect.isfunction(member) and not name.startswith("_"):
            setattr(cls, name, guard(member))
    return cls


def connect(dsn: str) -> psycopg.Connection:
    try:
        return psycopg.connect(
            # A custom plan for every execution. psycopg prepares a statement run five times; a
            # generic plan of one that names its repositories as a parameter cannot leave the other
            # repositories' partitions out when it is planned, so it plans and locks all of them:
            # with 1,000 repositories that cost a scoped search 0.4-1.6 s each time the plan was
            # built (p99 0.87 s against p50 20 ms), and ran an indexer's transaction out of lock slots.
            dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS,
            options=f"-c search_path={SCHEMA},public -c plan_cache_mode=force_custom_plan",
        )
    except psycopg.Error as exc:
        raise IndexFileError(
            f"cannot connect to PostgreSQL at {redact_dsn(dsn)}: {first_line(exc)}",
            "check CODEWHERE_DSN (and CODEWHERE_READ_DSN) and that the server is running",
        ) from exc


@_lost_connection_is_one_line
class PostgresStore:
    """Repository `repo` of the codewhere index in a PostgreSQL database.

    Writes go to the primary (`dsn`). With a `read_dsn`, everything else reads there — a replica,
    or libpq's multi-host list of them — until the store takes the writer lock; from then on it
    reads its own writes on the primary."""

    shared = True
    keywords_bm25 = False  # ts_rank, not bm25: a warm reader leaves keyword search to PostgreSQL

    def __init__(self, dsn: str, repo: str, connection: psycopg.Connection, read_dsn: str | None = None) -> None:
        self.dsn = dsn
        self.read_dsn = read_dsn
        self.repo = repo
        self.location = f"{redact_dsn(dsn)} (repository {repo})"
        self._primary: psycopg.Connection | None = connection if read_dsn is None else None
        self._reader: psycopg.Connection | None = connection if read_dsn is not None else None
        self._writing = False  # True once it took the writer's role: then it never reconnects silently
        self._snapshots = 0  # open read snapshots: a reconnect inside one would mix two states
        self._repo_id: int | None = None
        self._next_ids: dict[str, int] = {}  # the writer's next row id per table, under the writer lock
        self._rows_written = 0  # chunks written under the writer lock: enough, and its partitions are analyzed
        self._files_changed = False  # under the writer lock: its words are counted again when it ends
        self._ef_search = 0  # the HNSW search breadth this connection has set
        # the repository ids of the last Filters seen: one lookup per search, not one per read
        self._filter_ids: tuple[Filters | None, list[int]] = (None, [])

    # ---- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, dsn: str, repo: str, read_dsn: str | None = None) -> PostgresStore:
        store = cls(dsn, repo, connect(read_dsn or dsn), read_dsn)
        store._migrate()
        store._repo_id = store._find_repo_id()
        return store

    @property
    def _db(self) -> psycopg.Connection:
        """The connection this call uses: the primary once writing (or without a read DSN), else the reader."""
        if self._writing or not self.read_dsn:
            if self._primary is None:
                self._primary = connect(self.dsn)
            return self._primary
        if self._reader is None:
            self._reader = connect(self.read_dsn)
        return self._reader

    def _lost(self) -> bool:
        """Whether the connection in use is gone (the server stopped, the session was killed)."""
        db = self._primary if self._writing or not self.read_dsn else self._reader
        return db is None or db.broken or db.closed

    def _connected_dsn(self) -> str:
        return self.dsn if self._writing or not self.read_dsn else self.read_dsn

    def _may_retry(self) -> bool:
        """After a lost connection: whether a call may run again on a new one (a reader outside a snapshot)."""
        if self._writing or self._snapshots:
            return False
        self._drop_reader()
        return True

    def _drop_reader(self) -> None:
        """Forget a reader's connection (the next call makes a new one); a writer keeps its own."""
        if self._writing:
            return
        db = self._reader if self.read_dsn else self._primary
        if db is not None:
            with contextlib.suppress(psycopg.Error):
                db.close()
        self._reader = None if self.read_dsn else self._reader
        self._primary = None if not self.read_dsn else self._primary
        self._ef_search = 0

    def _schema_version(self, db: psycopg.Connection) -> int:
        exists = db.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'settings'", (SCHEMA,)
        ).fetchone()
        if not exists:
            return 0
        row = db.execute("SELECT value FROM settings WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        """Bring the schema to SCHEMA_VERSION, on the primary. A current schema is only read (on
        the read server where there is one)."""
        version = self._schema_version(self._db)
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise self._newer(version)
        db = self._primary if self._primary is not None else connect(self.dsn)
        self._primary = db
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_NAMESPACE, MIGRATION_LOCK))
            db.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            version = self._schema_version(db)  # again: another process may have migrated meanwhile
            if version > SCHEMA_VERSION:
                raise self._newer(version)
            for step in range(version, SCHEMA_VERSION):
                migrate_step(db, step)
            if version != SCHEMA_VERSION:
                db.execute(
                    """INSERT INTO settings VALUES('schema_version', %s)
                       ON CONFLICT(key) DO UPDATE SET value = excluded.value""",
                    (str(SCHEMA_VERSION),),
                )

    @staticmethod
    def _newer(version: int) -> IndexFileError:
        return IndexFileError(
            f"the database schema is version {version}, newer than this codewhere ({SCHEMA_VERSION})",
            "upgrade codewhere on this machine",
        )

    def _scalar(self, query: str | sql.Composed, params: Sequence[object] = ()) -> Any:
        """The first column of the first row (the query always returns one)."""
        row = self._db.execute(query, params).fetchone()
        assert row is not None, query
        return row[0]

    def _find_repo_id(self) -> int | None:
        row = self._db.execute("SELECT id FROM repos WHERE name = %s", (self.repo,)).fetchone()
        return int(row[0]) if row else None

    def _rid(self) -> int:
        """This repository's id, creating its row and its partitions on the first write."""
        if self._repo_id is None:
            self._db.execute("INSERT INTO repos(name) VALUES(%s) ON CONFLICT(name) DO NOTHING", (self.repo,))
            self._repo_id = self._find_repo_id()
            assert self._repo_id is not None
            create_partitions(self._db, self._repo_id)
        return self._repo_id

    def _new_ids(self, table: str, count: int) -> int:
        """The first of `count` fresh row ids of `table` in this repository's range. Only its
        writer (the advisory lock) adds rows, so it counts on from the largest id there."""
        rid = self._rid()
        if table not in self._next_ids:
            largest = self._scalar(sql.SQL("SELECT max(id) FROM {} WHERE repo_id = %s").format(sql.Identifier(table)), (rid,))
            self._next_ids[table] = first_id(rid) if largest is None else int(largest) + 1
        start = self._next_ids[table]
        self._next_ids[table] = start + count
        return start

    def _delete_rows(self, where: str, params: Sequence[object], tables: Sequence[str] = PARTITIONED) -> None:
        for table in tables:
            self._db.execute(sql.SQL("DELETE FROM {} WHERE repo_id = %s AND " + where).format(sql.Identifier(table)),
                             (self._rid(), *params))

    def forget_repository(self) -> None:
        """Delete this repository's rows, its vectors kept for the rebuild that follows (the
        partitions stay: readers see the old rows until the rebuild commits). Call under the
        writer lock."""
        with self.transaction():
            self.clear_files()
            self._db.execute("DELETE FROM repo_meta WHERE repo_id = %s", (self._rid(),))

    def drop_repository(self) -> bool:
        """Remove this repository: its row, then its partitions (detached concurrently, so searches
        of the others go on), and partitions a stopped drop left. False when there was none."""
        self._writing = True
        rid = self._find_repo_id()
        if rid is not None:
            with self._db.transaction():
                self._db.execute("DELETE FROM repos WHERE id = %s", (rid,))
                if not self._db.execute("SELECT 1 FROM repos LIMIT 1").fetchone():
                    self._db.execute("DELETE FROM settings WHERE key = ANY(%s)", (list(MODEL_KEYS),))
        self._repo_id = None
        for orphan in orphan_partitions(self._db):
            drop_partitions(self._db, orphan)
        return rid is not None

    @contextmanager
    def rebuilding(self) -> Iterator[PostgresStore]:
        """The repository emptied and written again in one transaction (the indexer's own
        transactions become savepoints): readers see the old repository until it commits, and a
        killed rebuild leaves it. The caller holds the writer lock."""
        try:
            with self._db.transaction():
                self.forget_repository()
                yield self
        finally:
            self._next_ids.clear()  # what the rolled-back or committed rows used is read again
            self._repo_id = self._find_repo_id()

    def close(self) -> None:
        for db in {id(c): c for c in (self._primary, self._reader) if c is not None}.values():
            db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._db.transaction():
            yield
            if self._repo_id is not None:
                self._db.execute("UPDATE repos SET generation = generation + 1 WHERE id = %s", (self._repo_id,))

    @contextmanager
    def writer_lock(self, wait_seconds: float) -> Iterator[None]:
        """An advisory lock per repository: one indexer at a time, any number of readers. From
        here on the store works on the primary."""
        self._writing = True
        # by name, not id: the first indexer of a repository takes it before the repository has a row
        key = (LOCK_NAMESPACE, zlib.crc32(self.repo.encode()) & 0x7FFFFFFF | 1)
        deadline = time.monotonic() + wait_seconds
        while not self._scalar("SELECT pg_try_advisory_lock(%s, %s)", key):
            if time.monotonic() >= deadline:
                raise IndexBusyError(
                    f"another codewhere process is indexing repository {self.repo!r} in {redact_dsn(self.dsn)}",
                    "wait for it to finish, or pass --wait SECONDS to wait longer",
                )
            time.sleep(0.05)
        try:
            self._repo_id = self._find_repo_id()  # another indexer may have created or rebuilt it
            self._next_ids.clear()
            self._rows_written = 0
            self._files_changed = False
            yield
            if self._repo_id is not None and self._rows_written and (
                    self._rows_written >= ANALYZE_AFTER_ROWS or self._never_analyzed(self._repo_id)):
                self._analyze(self._repo_id)
            if self._repo_id is not None and self._files_changed:
                with self._db.transaction():
                    count_words(self._db, self._repo_id)
        finally:
            self._next_ids.clear()
            self._db.execute("SELECT pg_advisory_unlock(%s, %s)", key)

    def _never_analyzed(self, repo_id: int) -> bool:
        """Whether the repository's chunks have no statistics yet: autovacuum never analyzes a
        partition of fewer than 50 rows, and waits for more in a bigger one."""
        return bool(self._scalar(
            """SELECT coalesce(last_analyze, last_autoanalyze) IS NULL FROM pg_stat_user_tables
               WHERE schemaname = %s AND relname = %s""", (SCHEMA, partition_name("chunks", repo_id))))

    def _analyze(self, repo_id: int) -> None:
        """Statistics for a repository's partitions after a big write, or its first: a new
        partition has none until autovacuum comes by, and without them the planner joins a
        search's vector hits to their chunks by scanning the partition (400 ms instead of 2 on a
        1,600-chunk repository), and its chunks to their files through the path index."""
        for table in PARTITIONED:
            self._db.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(partition_name(table, repo_id))))

    # ---- replicas ------------------------------------------------------------------------

    def replica_lag(self) -> ReplicaLag | None:
        """Where reads come from and how far behind the primary it is; None on the primary, and
        without a read DSN, with no query: reads then go to the primary (a search asks this each time)."""
        if self._writing or not self.read_dsn:
            return None
        db = self._db
        row = db.execute(
            """SELECT pg_is_in_recovery(),
                      (SELECT pg_wal_lsn_diff(latest_end_lsn, pg_last_wal_replay_lsn()) FROM pg_stat_wal_receiver),
                      extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())"""
        ).fetchone()
        if not row or not row[0]:
            return None
        behind = max(0, int(row[1] or 0))
        return ReplicaLag(f"{db.info.host}:{db.info.port}", behind, None if row[2] is None else float(row[2]))

    def primary_generation(self) -> tuple[int | None, int | None]:
        """(this repository's write count on the server that answers reads, on the primary)."""
        query = "SELECT generation FROM repos WHERE name = %s"
        here = self._db.execute(query, (self.repo,)).fetchone()
        if self._writing or not self.read_dsn:
            return (int(here[0]) if here else None,) * 2
        with connect(self.dsn) as primary:
            there = primary.execute(query, (self.repo,)).fetchone()
        return (int(here[0]) if here else None, int(there[0]) if there else None)

    # ---- meta ----------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        out: dict[str, str] = dict(self._db.execute("SELECT key, value FROM settings").fetchall())
        if self._repo_id is not None:
            out.update(self._db.execute("SELECT key, value FROM repo_meta WHERE repo_id = %s", (self._repo_id,)).fetchall())
        return out

    def set_meta(self, values: dict[str, str]) -> None:
        rid = self._rid()
        with self._db.cursor() as cur:
            cur.executemany(
                """INSERT INTO repo_meta VALUES(%s, %s, %s)
                   ON CONFLICT(repo_id, key) DO UPDATE SET value = excluded.value""",
                [(rid, k, v) for k, v in values.items()],
            )

    def model(self) -> ModelInfo | None:
        meta: dict[str, str] = dict(self._db.execute("SELECT key, value FROM settings WHERE key = ANY(%s)", (list(MODEL_KEYS),)).fetchall())
        if "model_fingerprint" not in meta:
            return None
        return ModelInfo(meta["model_id"], int(meta["model_dim"]), meta["model_fingerprint"])

    def bind_model(self, info: ModelInfo) -> None:
        """Record the database's model and size its vector column; the caller checked for a mismatch."""
        self._writing = True
        with self.transaction():
            self._db.execute("LOCK TABLE embeddings IN ACCESS EXCLUSIVE MODE")
            if self.model() is not None:
                return  # another indexer bound it first (the caller's check covers a mismatch)
            self._db.cursor().executemany(
                "INSERT INTO settings VALUES(%s, %s) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [("model_id", info.id), ("model_dim", str(info.dim)), ("model_fingerprint", info.fingerprint)],
            )
            self._db.execute("TRUNCATE embeddings")
            size_vector_column(self._db, int(info.dim))

    # ---- writing files and chunks (call inside transaction()) ----------------------------

    def file_states(self, under: Sequence[str] | None = None) -> dict[str, FileState]:
        if self._repo_id is None:
            return {}
        sql = "SELECT path, size, mtime_ns, hash, skip_reason FROM files WHERE repo_id = %s"
        if under is None:
            rows = list(self._db.execute(sql, (self._repo_id,)))
        else:
            where = " AND (path = %s OR (path > %s AND path < %s))"
            rows = [row for path in under for row in self._db.execute(sql + where, (self._repo_id, *path_bounds(path)))]
        return {path: FileState(size, mtime, h, skip) for path, size, mtime, h, skip in rows}

    def file_stamps(self) -> list[FileStamp]:
        if self._repo_id is None:
            return []
        return cast(list[FileStamp], self._db.execute(
            "SELECT path, size, mtime_ns, skip_reason FROM files WHERE repo_id = %s", (self._repo_id,)).fetchall())

    def content_hashes_in(self, paths: Sequence[str]) -> set[str]:
        if self._repo_id is None:
            return set()
        return {h for (h,) in self._db.execute(
            """SELECT DISTINCT c.content_hash FROM chunks c JOIN files f ON f.repo_id = c.repo_id AND f.id = c.file_id
               WHERE f.repo_id = %s AND c.repo_id = %s AND f.path = ANY(%s)""",
            (self._repo_id, self._repo_id, list(paths)),
        )}

    def symbols_in(self, paths: Sequence[str]) -> list[SymbolRef]:
        if self._repo_id is None:
            return []
        return [SymbolRef(*r) for r in self._db.execute(
            """SELECT s.id, s.file_id, s.name, s.kind, s.parent FROM symbols s JOIN files f ON f.repo_id = s.repo_id AND f.id = s.file_id
               WHERE f.repo_id = %s AND s.repo_id = %s AND f.path = ANY(%s)""",
            (self._repo_id, self._repo_id, list(paths)),
        )]

    def move_edge_targets(self, moves: Sequence[tuple[int, int]]) -> None:
        with self._db.cursor() as cur:
            cur.executemany("UPDATE edges SET target_id = %s WHERE repo_id = %s AND target_id = %s",
                            [(new, self._repo_id, old) for old, new in moves])

    def _upsert_file(self, record: FileRecord, digest: str | None, skip: SkipReason | None) -> int:
        rid = self._rid()
        self._files_changed = True
        row = self._db.execute(
            """INSERT INTO files(repo_id, id, path, size, mtime_ns, hash, kind, language, skip_reason)
               VALUES(%s, %s, %s, %s, %s, %s, %s, %s, %s)
               ON CONFLICT(repo_id, path) DO UPDATE SET size=excluded.size, mtime_ns=excluded.mtime_ns,
                 hash=excluded.hash, kind=excluded.kind, language=excluded.language, skip_reason=excluded.skip_reason
               RETURNING id""",
            (rid, self._new_ids("files", 1), record.path, record.size, record.mtime_ns, digest, record.kind.value,
             record.language, skip.value if skip else None),
        ).fetchone()
        assert row is not None
        return int(row[0])

    def _delete_content_of(self, file_ids: Sequence[int]) -> None:
        self._delete_rows("file_id = ANY(%s)", (list(file_ids),), ("chunks", "definitions", "edges", "symbols"))
        self._db.execute("UPDATE files SET fts = NULL WHERE repo_id = %s AND id = ANY(%s)", (self._rid(), list(file_ids)))

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
        file_id = self._upsert_file(record, digest, None)
        rid = self._rid()
        self._delete_content_of([file_id])
        if fts_rows:
            self._db.execute(
                """UPDATE files SET fts = setweight(to_tsvector('simple', %s), 'B') || setweight(to_tsvector('simple', %s), 'A')
                   WHERE repo_id = %s AND id = %s""",
                _storable([(fts_rows[0][0], " ".join(body for _, body in fts_rows)[:FILE_FTS_CHARS], rid, file_id)])[0],
            )
        with self._db.cursor() as cur:
            first = self._new_ids("chunks", len(chunks))
            self._rows_written += len(chunks)
            ids = list(range(first, first + len(chunks)))
            if chunks:
                cur.executemany(
                    """INSERT INTO chunks(repo_id, id, file_id, start_line, end_line, content_hash, text, embed_text, mentions,
                                         unit_start, unit_end, unit_name, fts)
                       VALUES(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
                         setweight(to_tsvector('simple', %s), 'B') || setweight(to_tsvector('simple', %s), 'A'))""",
                    _storable([(rid, cid, file_id, c.start_line, c.end_line, c.content_hash, c.text,
                                c.embed_text if c.embed else None, " ".join(c.mentions) or None, *unit_columns(c.unit),
                                path_tokens, body_tokens)
                               for cid, c, (path_tokens, body_tokens) in zip(ids, chunks, fts_rows, strict=True)]),
                )
            definitions = [(rid, cid, file_id, key, spelled) for cid, c in zip(ids, chunks, strict=True)
                           for key, spelled in definition_rows(c.defines)]
            if definitions:
                cur.executemany("INSERT INTO definitions(repo_id, chunk_id, file_id, name, spelled) VALUES(%s, %s, %s, %s, %s)",
                                _storable(definitions))
            chunk_of = smallest_chunk_by_line([(cid, c.start_line, c.end_line) for cid, c in zip(ids, chunks, strict=True)])
            symbol_ids: dict[str, int] = {}
            if symbols:
                first_symbol = self._new_ids("symbols", len(symbols))
                cur.executemany(
                    """INSERT INTO symbols(repo_id, id, file_id, name, name_key, qualified_name, kind, start_line, end_line,
                         signature, doc, decorators, parent, split, chunk_id, fts)
                       VALUES(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
                         setweight(to_tsvector('simple', %s), 'A') || setweight(to_tsvector('simple', %s), 'B')
                         || setweight(to_tsvector('simple', %s), 'C'))""",
                    _storable([(rid, first_symbol + n, file_id, s.name, key, s.qualified_name, s.kind, s.start_line,
                                s.end_line, s.signature, s.doc, "\n".join(s.decorators), s.parent, split,
                                chunk_of.get(s.start_line), key, split, qualified)
                               for n, (s, (key, split, qualified)) in enumerate(zip(symbols, symbol_fts_rows, strict=True))]),
                )
                for n, symbol in enumerate(symbols):
                    symbol_ids.setdefault(symbol.qualified_name, first_symbol + n)
            if edges:
                first_edge = self._new_ids("edges", len(edges))
                cur.executemany(
                    """INSERT INTO edges(repo_id, id, file_id, kind, source_id, target_name, line, chunk_id)
                       VALUES(%s, %s, %s, %s, %s, %s, %s, %s)""",
                    _storable([(rid, first_edge + n, file_id, e.kind.value, symbol_ids.get(e.source), e.target, e.line,
                                chunk_of.get(e.line)) for n, e in enumerate(edges)]),
                )
        return ids

    def record_skipped_file(self, record: FileRecord, reason: SkipReason) -> None:
        self._delete_content_of([self._upsert_file(record, None, reason)])

    def update_file_stat(self, path: str, size: int, mtime_ns: int) -> None:
        self._db.execute(
            "UPDATE files SET size = %s, mtime_ns = %s WHERE repo_id = %s AND path = %s", (size, mtime_ns, self._rid(), path)
        )

    def delete_files(self, paths: Iterable[str]) -> None:
        ids = [int(r[0]) for r in self._db.execute(
            "DELETE FROM files WHERE repo_id = %s AND path = ANY(%s) RETURNING id", (self._rid(), list(paths)))]
        if ids:
            self._files_changed = True
            self._delete_content_of(ids)

    def forget_contents(self, paths: Sequence[str]) -> None:
        """Nothing ahead: `replace_file` replaces a file's rows as it writes them, and no keyword
        index here writes anything out per statement (SQLite's FTS5 did)."""

    def expect_files(self, size: int) -> None:
        """Nothing to prepare: PostgreSQL's keyword index has no compact form."""

    def clear_files(self) -> None:
        """Every file's rows; the vectors stay (keyed by text, what the rewrite reuses)."""
        self._files_changed = True
        self._delete_rows("TRUE", (), [t for t in PARTITIONED if t != "embeddings"])

    # ---- vectors -------------------------------------------------------------------------

    def chunks_without_vectors(self, limit: int, after_id: int = 0) -> list[tuple[int, str, str]]:
        if self._repo_id is None:
            return []
        rows = self._db.execute(
            """SELECT c.id, c.content_hash, c.embed_text FROM chunks c
               WHERE c.repo_id = %s AND c.id > %s AND c.embed_text IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.repo_id = c.repo_id AND e.content_hash = c.content_hash)
               ORDER BY c.id LIMIT %s""",
            (self._repo_id, after_id, limit),
        )
        return [(int(i), h, t) for i, h, t in rows]

    def count_chunks_without_vectors(self, after_id: int = 0) -> int:
        if self._repo_id is None:
            return 0
        row = self._db.execute(
            """SELECT count(*) FROM chunks c WHERE c.repo_id = %s AND c.id > %s AND c.embed_text IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.repo_id = c.repo_id AND e.content_hash = c.content_hash)""",
            (self._repo_id, after_id),
        ).fetchone()
        return int(row[0]) if row else 0

    def add_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        rid = self._rid()
        with self._db.cursor() as cur:
            cur.executemany(
                # a text written twice in one batch is embedded once, but may come twice
                """INSERT INTO embeddings(repo_id, content_hash, embedding) VALUES(%s, %s, %s::vector)
                   ON CONFLICT(repo_id, content_hash) DO NOTHING""",
                [(rid, h, _vector_literal(v)) for h, v in zip(hashes, vectors, strict=True)],
            )

    def delete_orphan_vectors(self, among: Sequence[str] | None = None) -> int:
        if self._repo_id is None:
            return 0
        sql = """DELETE FROM embeddings e WHERE e.repo_id = %s
                   AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.repo_id = e.repo_id AND c.content_hash = e.content_hash)"""
        cur = self._db.execute(sql, (self._repo_id,)) if among is None else self._db.execute(
            sql + " AND e.content_hash = ANY(%s)", (self._repo_id, sorted(among))
        )
        return cur.rowcount

    def vector_count(self) -> int:
        """Vectors this repository's chunks use."""
        if self._repo_id is None:
            return 0
        row = self._db.execute(
            """SELECT count(*) FROM embeddings e WHERE e.repo_id = %s
               AND EXISTS (SELECT 1 FROM chunks c WHERE c.repo_id = e.repo_id AND c.content_hash = e.content_hash)""",
            (self._repo_id,),
        ).fetchone()
        return int(row[0]) if row else 0

    def vector_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the nearest chunks, best first: the HNSW index first;
        when filters leave too few of its rows, an exact scan of the filtered chunks. (Before a
        model is bound the table is empty, and so is the answer.)"""
        literal = _vector_literal(query)
        where, params = self._filter(filters, "c", "f")
        among, repos = self._repo_clause(filters, "embeddings")  # an unscoped search reads every partition
        fetch = limit if filters.is_empty() else limit * HNSW_OVERFETCH
        try:
            ef_search = max(100, min(fetch, 1000))
            if ef_search != self._ef_search:  # a session setting: one round trip when it changes, not per query
                self._db.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef_search),))
                self._ef_search = ef_search
            rows = self._db.execute(
                f"""WITH knn AS (SELECT repo_id, content_hash, embedding <=> %s::vector AS distance FROM embeddings
                                 WHERE TRUE {among} ORDER BY embedding <=> %s::vector LIMIT %s)
                    SELECT c.id, knn.distance FROM knn
                    JOIN chunks c ON c.repo_id = knn.repo_id AND c.content_hash = knn.content_hash
                    JOIN files f ON f.repo_id = c.repo_id AND f.id = c.file_id WHERE TRUE {where}
                    ORDER BY knn.distance, c.id LIMIT %s""",
                (literal, *repos, literal, fetch, *params, limit),
            ).fetchall()
            if len(rows) < limit and not filters.is_empty():
                rows = self._db.execute(
                    f"""SELECT c.id, e.embedding <=> %s::vector AS distance FROM chunks c
                        JOIN files f ON f.repo_id = c.repo_id AND f.id = c.file_id
                        JOIN embeddings e ON e.repo_id = c.repo_id AND e.content_hash = c.content_hash
                        WHERE TRUE {where} {among.replace("embeddings.", "e.")} ORDER BY distance, c.id LIMIT %s""",
                    (literal, *params, *repos, limit),
                ).fetchall()
        except psycopg.errors.DataException as exc:
            raise ModelError(f"vector search failed ({exc})", "run `codewhere index --rebuild`") from exc
        return [(int(cid), 1.0 - float(distance)) for cid, distance in rows]

    # ---- the code graph (this repository) ------------------------------------------------

    def resolution_inputs(
        self, names: Sequence[str] | None = None, paths: Sequence[str] = ()
    ) -> tuple[list[EdgeRow], list[SymbolRef], set[tuple[int, str]]]:
        rid = self._repo_id
        edge_sql = f"""SELECT e.id, e.file_id, e.kind, e.target_name, coalesce(s.parent, '')
                       FROM edges e LEFT JOIN symbols s ON s.repo_id = e.repo_id AND s.id = e.source_id
                       WHERE e.repo_id = %s AND NOT {KEPT_PRECISE}"""
        if names is None:
            edges = [EdgeRow(*r) for r in self._db.execute(edge_sql, (rid,))]
            symbols = [SymbolRef(*r) for r in self._db.execute(
                "SELECT id, file_id, name, kind, parent FROM symbols WHERE repo_id = %s", (rid,)
            )]
            imported = {(int(f), n) for f, n in self._db.execute(
                "SELECT file_id, target_name FROM edges WHERE repo_id = %s AND kind = 'import'", (rid,)
            )}
            return edges, symbols, imported
        edges = [EdgeRow(*r) for r in self._db.execute(
            edge_sql + """ AND (e.target_name = ANY(%s)
                           OR e.file_id IN (SELECT id FROM files WHERE repo_id = %s AND path = ANY(%s)))""",
            (rid, sorted(names), rid, list(paths)),
        )]
        symbols = [SymbolRef(*r) for r in self._db.execute(
            "SELECT id, file_id, name, kind, parent FROM symbols WHERE repo_id = %s AND name = ANY(%s)",
            (rid, sorted({e.target_name for e in edges})),
        )]
        imported = {(int(f), n) for f, n in self._db.execute(
            "SELECT file_id, target_name FROM edges WHERE repo_id = %s AND kind = 'import' AND file_id = ANY(%s)",
            (rid, sorted({e.file_id for e in edges})),
        )}
        return edges, symbols, imported

    def edge_sites(self, paths: Sequence[str] | None = None) -> list[EdgeSite]:
        sql = """SELECT e.id, f.path, e.line, e.target_name, e.kind FROM edges e JOIN files f ON f.repo_id = e.repo_id AND f.id = e.file_id
                 WHERE e.repo_id = %s"""
        if paths is None:
            return [EdgeSite(int(r[0]), r[1], int(r[2]), r[3], r[4]) for r in self._db.execute(sql, (self._repo_id,))]
        return [EdgeSite(int(r[0]), r[1], int(r[2]), r[3], r[4])
                for r in self._db.execute(sql + " AND f.path = ANY(%s)", (self._repo_id, list(paths)))]

    def resolved_edges(self) -> list[tuple[EdgeSite, int | None, str]]:
        return [(EdgeSite(int(r[0]), r[1], int(r[2]), r[3], r[4]), None if r[5] is None else int(r[5]), r[6])
                for r in self._db.execute(
            """SELECT e.id, f.path, e.line, e.target_name, e.kind, e.target_id, e.resolution
               FROM edges e JOIN files f ON f.repo_id = e.repo_id AND f.id = e.file_id WHERE e.repo_id = %s""", (self._repo_id,))]

    def resolution_counts(self, resolution: str) -> dict[str, int]:
        return {r[0]: int(r[1]) for r in self._db.execute(
            """SELECT f.path, count(*) FROM edges e JOIN files f ON f.repo_id = e.repo_id AND f.id = e.file_id
               WHERE e.repo_id = %s AND e.resolution = %s GROUP BY f.path""", (self._repo_id, resolution))}

    def symbol_spans(self, paths: Sequence[str]) -> list[SymbolSpan]:
        return [SymbolSpan(int(r[0]), r[1], r[2], int(r[3]), int(r[4])) for r in self._db.execute(
            """SELECT s.id, f.path, s.name, s.start_line, s.end_line FROM symbols s JOIN files f ON f.repo_id = s.repo_id AND f.id = s.file_id
               WHERE s.repo_id = %s AND f.path = ANY(%s)""", (self._repo_id, list(paths)))]

    def set_edge_targets(self, rows: Iterable[tuple[int, int | None, str]]) -> None:
        """One COPY into a temporary table, then one UPDATE: row-by-row updates take minutes on big repos."""
        db = self._db
        db.execute("CREATE TEMPORARY TABLE IF NOT EXISTS edge_targets(id BIGINT, target_id BIGINT, resolution TEXT)")
        db.execute("TRUNCATE edge_targets")
        with db.cursor().copy("COPY edge_targets(id, target_id, resolution) FROM STDIN") as copy:
            for edge_id, target, resolution in rows:
                copy.write_row((edge_id, target, resolution))
        db.execute(
            """UPDATE edges e SET target_id = t.target_id, resolution = t.resolution FROM edge_targets t
               WHERE e.repo_id = %s AND e.id = t.id AND (e.target_id IS DISTINCT FROM t.target_id OR e.resolution <> t.resolution)""",
            (self._rid(),),
        )

    def _symbol_rows(self, where: str, params: Sequence[object]) -> list[SymbolRow]:
        query = f"""SELECT {_SYMBOL_COLUMNS} FROM symbols s JOIN files f ON f.repo_id = s.repo_id AND f.id = s.file_id
                     WHERE s.repo_id = %s AND {where}"""
        return [SymbolRow(*r) for r in self._db.execute(query, (self._repo_id, *params))]

    def symbols_named(self, name: str) -> list[SymbolRow]:
        return self._symbol_rows("s.name = %s ORDER BY f.path, s.start_line", (name,))

    def symbols_qualified(self, qualified: str) -> list[SymbolRow]:
        escaped = like_escape(qualified)
        return self._symbol_rows(
            "(s.qualified_name = %s OR s.qualified_name LIKE %s) ORDER BY f.path, s.start_line", (qualified, "%." + escaped)
        )

    def symbols_at(self, path: str, line: int) -> list[SymbolRow]:
        return self._symbol_rows(
            "f.path = %s AND s.start_line <= %s AND s.end_line >= %s ORDER BY s.start_line DESC, s.end_line ASC",
            (path, line, line),
        )

    def symbols_by_id(self, ids: Sequence[int]) -> dict[int, SymbolRow]:
        if not ids:
            return {}
        query = f"""SELECT {_SYMBOL_COLUMNS} FROM symbols s JOIN files f ON f.repo_id = s.repo_id AND f.id = s.file_id
                     WHERE s.repo_id = ANY(%s) AND f.repo_id = ANY(%s) AND s.id = ANY(%s)"""
        repos = repositories_of(ids)
        return {r.id: r for r in (SymbolRow(*row) for row in self._db.execute(query, (repos, repos, list(ids))))}

    def outline(self, path: str) -> list[SymbolRow]:
        return self._symbol_rows("f.path = %s ORDER BY s.start_line, s.end_line DESC", (path,))

    def symbol_search(self, query: TermQuery, limit: int) -> list[SymbolRow]:
        if query.match == "name":
            return self._symbol_rows("s.name_key = %s ORDER BY f.path, s.start_line LIMIT %s", (query.terms[0], limit))
        text = tsquery_text(query)
        if not text:
            return []
        return self._symbol_rows(
            """s.fts @@ to_tsquery('simple', %s)
               ORDER BY ts_rank(%s::float4[], s.fts, to_tsquery('simple', %s)) DESC, f.path LIMIT %s""",
            (text, RANK_WEIGHTS, text, limit),
        )

    def _edge_hits(self, where: str, params: Sequence[object]) -> list[EdgeHit]:
        query = f"SELECT {_EDGE_COLUMNS} FROM edges e JOIN files f ON f.repo_id = e.repo_id AND f.id = e.file_id WHERE {where}"
        return [EdgeHit(*r) for r in self._db.execute(query, params)]

    def edges_to(self, symbol_ids: Sequence[int], kinds: Sequence[str]) -> list[EdgeHit]:
        if not symbol_ids:
            return []
        return self._edge_hits(
            "e.repo_id = ANY(%s) AND f.repo_id = ANY(%s) AND e.target_id = ANY(%s) AND e.kind = ANY(%s) ORDER BY f.path, e.line",
            (repositories_of(symbol_ids), repositories_of(symbol_ids), list(symbol_ids), list(kinds)),
        )

    def unresolved_edges_named(self, name: str, kinds: Sequence[str]) -> list[EdgeHit]:
        return self._edge_hits(
            """e.repo_id = %s AND e.target_name = %s AND e.target_id IS NULL AND e.kind = ANY(%s)
               ORDER BY f.path, e.line""",
            (self._repo_id, name, list(kinds)),
        )

    def edges_from(self, symbol_id: int, kinds: Sequence[str]) -> list[EdgeHit]:
        return self._edge_hits("e.repo_id = %s AND e.source_id = %s AND e.kind = ANY(%s) ORDER BY e.line",
                               (*repositories_of([symbol_id]), symbol_id, list(kinds)))

    def edge_sources(self, target_ids: Sequence[int], kinds: Sequence[str]) -> list[EdgeSource]:
        rows = self._db.execute(_EDGE_SOURCES_SQL, {"repos": repositories_of(target_ids), "targets": list(target_ids),
                                                    "kinds": list(kinds)})
        return [EdgeSource(int(r[0]), r[1], r[2], int(r[3]), r[4], int(r[5])) for r in rows]

    def interrupt(self) -> None:
        """Stop the statement running in another thread (it raises QueryInterrupted there)."""
        self._db.cancel_safe()

    def graph_stats(self) -> dict[str, object]:
        rid = self._repo_id
        by_resolution: dict[str, int] = dict(self._db.execute(
            "SELECT kind || ':' || resolution, count(*) FROM edges WHERE repo_id = %s GROUP BY 1", (rid,)
        ).fetchall())
        per_language: dict[str, dict[str, dict[str, int]]] = {}
        for language, kind, resolution, n in self._db.execute(
            """SELECT f.language, e.kind, e.resolution, count(*) FROM edges e JOIN files f ON f.repo_id = e.repo_id AND f.id = e.file_id
               WHERE e.repo_id = %s AND f.repo_id = %s GROUP BY 1, 2, 3""",
            (rid, rid),
        ):
            per_language.setdefault(language, {}).setdefault(kind, {})[resolution] = n
        symbols: dict[str, int] = dict(self._db.execute("SELECT kind, count(*) FROM symbols WHERE repo_id = %s GROUP BY 1", (rid,)).fetchall())
        return {"symbols": symbols, "edges": by_resolution, "per_language": per_language}

    # ---- reading for search (every repository unless filters name some) ------------------

    def _all_repo_ids(self) -> list[int]:
        return [int(r[0]) for r in self._db.execute("SELECT id FROM repos")]

    def _repo_ids(self, names: Sequence[str]) -> list[int]:
        return [int(r[0]) for r in self._db.execute("SELECT id FROM repos WHERE name = ANY(%s)", (list(names),))]

    def _repo_clause(self, filters: Filters, *aliases: str) -> tuple[str, list[object]]:
        """`AND alias.repo_id = ANY(ids)` for each alias when the filters name repositories."""
        if not filters.repos:
            return "", []
        if self._filter_ids[0] is not filters:  # a search passes one Filters to each of its reads
            self._filter_ids = (filters, self._repo_ids(filters.repos))
        ids = self._filter_ids[1]
        return " AND " + " AND ".join(f"{alias}.repo_id = ANY(%s)" for alias in aliases), [ids] * len(aliases)

    def _filter(self, filters: Filters, *partitioned: str) -> tuple[str, list[object]]:
        """The filters as SQL over files `f`; a repository filter goes on each table in `partitioned`
        (default `f`) as ids, so the planner reads only those repositories' partitions."""
        repo_sql, params = self._repo_clause(filters, *(partitioned or ("f",)))
        clauses: list[str] = [repo_sql.removeprefix(" AND ")] if repo_sql else []
        if filters.scopes:
            ors = []
            for scope in filters.scopes:
                escaped = like_escape(scope)
                ors.append("(f.path = %s OR f.path LIKE %s)")
                params += [scope, escaped + "/%"]
            clauses.append("(" + " OR ".join(ors) + ")")
        if filters.exclude_kinds:
            clauses.append("NOT (f.kind = ANY(%s))")
            params.append([k.value for k in filters.exclude_kinds])
        return "".join(f" AND {c}" for c in clauses), params

    def keyword_search(self, query: TermQuery, limit: int, filters: Filters) -> list[tuple[int, float]]:
        rows = self._ranked(query, limit, filters, f"""SELECT c.id, ts_rank(%s::float4[], c.fts, q, {RANK_NORMALISATION}) AS score
            FROM chunks c JOIN files f ON f.repo_id = c.repo_id AND f.id = c.file_id, to_tsquery('simple', %s) q
            WHERE c.fts @@ q {{where}} ORDER BY score DESC, c.id LIMIT %s""", "c", "f")
        return [(int(i), float(s)) for i, s in rows]

    def file_keyword_search(self, query: TermQuery, limit: int, filters: Filters) -> dict[tuple[str, str], float]:
        rows = self._ranked(query, limit, filters, f"""SELECT r.name, f.path, ts_rank(%s::float4[], f.fts, q, {RANK_NORMALISATION}) AS score
            FROM files f JOIN repos r ON r.id = f.repo_id, to_tsquery('simple', %s) q
            WHERE f.fts @@ q {{where}} ORDER BY score DESC, f.id LIMIT %s""")
        return {(str(repo), str(path)): float(score) for repo, path, score in rows}

    def _ranked(self, query: TermQuery, limit: int, filters: Filters, sql: str, *partitioned: str) -> list[Any]:
        """The rows of a text-search query (`{where}` takes the filter's clauses), given the
        weights of D, C, B (path) and A (text), the query and the limit; none without terms."""
        text = tsquery_text(query)
        if not text:
            return []
        where, params = self._filter(filters, *partitioned)
        try:
            return self._db.execute(sql.format(where=where), ([0.0, 0.1, *query.field_weights], text, *params, limit)).fetchall()
        except psycopg.errors.SyntaxError as exc:
            raise QueryError(f"the keyword query could not run ({exc})", "remove unusual punctuation from the query") from exc

    def chunk_rows(self, ids: Sequence[int], filters: Filters) -> dict[int, ChunkRow]:
        if not ids:
            return {}
        where, params = self._filter(filters, "c", "f")
        repos = repositories_of(ids)
        rows = self._db.execute(f"{_CHUNK_ROW_SQL} AND c.id = ANY(%s) {where}",
                                (*_CHUNK_ROW_PARAMS, repos, repos, repos, list(ids), *params))
        return {int(row[0]): chunk_row(row) for row in rows}

    # ---- what a warm reader reads (store/warm.py): every repository's chunks ----------------

    def change_token(self) -> object:
        return self._scalar("SELECT coalesce(string_agg(id || ':' || generation, ',' ORDER BY id), '') FROM repos")

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        self._snapshots += 1
        try:
            with self._db.transaction():
                self._db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield
        finally:
            self._snapshots -= 1

    def file_chunk_ranges(self) -> dict[int, tuple[object, ...]]:
        rows = self._db.execute("""SELECT f.id, f.path, f.hash, f.kind, f.language, min(c.id), max(c.id), count(*)
                                   FROM files f JOIN chunks c ON c.repo_id = f.repo_id AND c.file_id = f.id
                                   GROUP BY f.repo_id, f.id""")
        return {int(file_id): tuple(held) for file_id, *held in rows}

    def rows_of_files(self, file_ids: Sequence[int] | None) -> Iterator[tuple[int, ChunkRow]]:
        repos = self._all_repo_ids() if file_ids is None else repositories_of(file_ids)
        where, params = ("", ()) if file_ids is None else ("AND c.file_id = ANY(%s)", (list(file_ids),))
        for row in self._db.execute(f"{_CHUNK_ROW_SQL} {where}", (*_CHUNK_ROW_PARAMS, repos, repos, repos, *params)):
            yield int(row[-1]), chunk_row(row)

    def call_target_chunks(self, chunk_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
        if not chunk_ids:
            return {}
        repos = repositories_of(chunk_ids)
        return targets_with_resolution(self._db.execute(
            f"{_CALL_TARGETS_SQL} AND e.repo_id = ANY(%s) AND s.repo_id = ANY(%s) AND e.chunk_id = ANY(%s)",
            (repos, repos, list(chunk_ids))))

    def chunks_defining_names(
        self, names: Sequence[str], filters: Filters, spelled: Sequence[str] = ()
    ) -> dict[str, list[int]]:
        if not names:
            return {}
        where, params = self._filter(filters, "d", "c", "f")
        keys = spelled_keys(names, spelled)
        exact = "AND (d.name <> ALL(%s) OR d.spelled = ANY(%s))" if keys else ""
        rows = self._db.execute(
            f"""SELECT DISTINCT d.name, c.id FROM definitions d JOIN chunks c ON c.repo_id = d.repo_id AND c.id = d.chunk_id
                JOIN files f ON f.repo_id = c.repo_id AND f.id = c.file_id WHERE d.name = ANY(%s) {exact} {where} ORDER BY c.id""",
            (list(names), *([keys, list(spelled)] if keys else []), *params),
        )
        return grouped(rows)

    def chunk_at(self, path: str, line: int) -> ChunkAt | None:
        row = self._db.execute(
            # an empty embedding text was embedded by a worker and not kept (reading.py)
            """SELECT c.id, coalesce(nullif(c.embed_text, ''), f.path || chr(10) || c.text),
                      (SELECT e.embedding::text FROM embeddings e WHERE e.repo_id = %s AND e.content_hash = c.content_hash)
               FROM chunks c JOIN files f ON f.repo_id = c.repo_id AND f.id = c.file_id
               WHERE f.repo_id = %s AND f.path = %s AND c.start_line <= %s AND c.end_line >= %s
               ORDER BY c.end_line - c.start_line LIMIT 1""",
            (self._repo_id, self._repo_id, path, line, line),
        ).fetchone()
        if not row:
            return None
        vector = np.array(row[2].strip("[]").split(","), np.float32) if row[2] else None
        return ChunkAt(int(row[0]), row[1], vector)

    def chunk_spans(self, filters: Filters) -> list[tuple[str, int, int]]:
        where, params = self._filter(filters, "c", "f")
        rows = self._db.execute(
            f"""SELECT f.path, c.start_line, c.end_line FROM chunks c JOIN files f ON f.repo_id = c.repo_id AND f.id = c.file_id
                WHERE TRUE {where}""",
            params,
        )
        return [(p, int(s), int(e)) for p, s, e in rows]

    def indexed_paths(self, filters: Filters) -> list[str]:
        where, params = self._filter(filters)
        rows = self._db.execute(f"SELECT f.path FROM files f WHERE f.skip_reason IS NULL {where}", params)
        return [r[0] for r in rows]

    def route(self, words: Sequence[str], limit: int) -> Route | None:
        """The `limit` repositories whose files hold these words best, best first (BM25 with each
        repository one document, a word's count the files that hold it, its length its file count);
        None when the index holds no more than `limit` repositories, or none of them holds a word:
        then the search reads every one."""
        words = sorted({w for term in words for w in re.findall(r"\w+", term.lower())})
        if not words:
            return None
        row = self._db.execute("SELECT count(*), greatest(avg(file_count), 1)::float8 FROM repos").fetchone()
        assert row is not None
        among, average_files = int(row[0]), float(row[1])
        if among <= limit:
            return None
        # (the repository count and average length are parameters: as a subquery the planner ran
        # them once per matching row, 2,644 times for "read a configuration file": 346 ms, not 10)
        rows = self._db.execute(
            """WITH held AS (SELECT repo_id, word, files::float8 AS files FROM repo_words WHERE word = ANY(%s)),
                    spread AS (SELECT word, count(*)::float8 AS repos FROM held GROUP BY word)
               SELECT r.name, sum(ln(1 + (%s - spread.repos + 0.5) / (spread.repos + 0.5))
                                  * held.files * %s / (held.files + %s * (1 - %s + %s * r.file_count / %s))) AS score
               FROM held JOIN spread USING (word) JOIN repos r ON r.id = held.repo_id
               GROUP BY r.name ORDER BY score DESC, r.name LIMIT %s""",
            (words, float(among), ROUTE_K1 + 1, ROUTE_K1, ROUTE_B, ROUTE_B, average_files, limit)).fetchall()
        return Route(tuple(str(name) for name, _ in rows), among) if rows else None

    def repositories(self, named: Sequence[str] | None = None) -> list[str]:
        if named is not None:  # which of these exist: one indexed lookup, not the whole list
            return [r[0] for r in self._db.execute("SELECT name FROM repos WHERE name = ANY(%s) ORDER BY name", (list(named),))]
        return [r[0] for r in self._db.execute("SELECT name FROM repos ORDER BY name")]

    def stats(self) -> StoreStats:
        rid = self._repo_id
        db = self._db

        def grouped(query: str) -> dict[str, int]:
            return {k: int(v) for k, v in db.execute(query, (rid,)).fetchall()}

        files, size = db.execute(
            "SELECT count(*), coalesce(sum(size), 0) FROM files WHERE repo_id = %s AND skip_reason IS NULL", (rid,)
        ).fetchone() or (0, 0)
        chunks_row = db.execute("SELECT count(*) FROM chunks WHERE repo_id = %s", (rid,)).fetchone()
        return StoreStats(
            int(files), int(chunks_row[0]) if chunks_row else 0, int(size),
            grouped("SELECT skip_reason, count(*) FROM files WHERE repo_id = %s AND skip_reason IS NOT NULL GROUP BY 1"),
            grouped("SELECT kind, count(*) FROM files WHERE repo_id = %s AND skip_reason IS NULL GROUP BY 1"),
            grouped("SELECT language, count(*) FROM files WHERE repo_id = %s AND skip_reason IS NULL GROUP BY 1 ORDER BY 2 DESC"),
            self.meta(),
        )
