"""The SQLite index file: opening it, its transactions and writer lock, its meta; the state a
transaction carries for the layers above, and the hooks its commit calls."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Self

import apsw
import sqlite_vec

from codewhere.errors import (
    ForeignFileError,
    IndexFileError,
)
from codewhere.locks import index_writer_lock
from codewhere.store import kept_postings
from codewhere.store.base import (
    chunk_text,
)
from codewhere.store.source_text import SourceTexts
from codewhere.store.sqlite.schema import (
    _SCHEMA,
    APPLICATION_ID,
    BUSY_TIMEOUT_MS,
    KEPT_THROUGH,
    SCHEMA_VERSION,
    _apsw_errors_mapped,
    _configure,
    _corrupt,
    _filter_sql,
    _identity,
    _mapped,
    _write_error,
)
from codewhere.types import (
    Filters,
)

log = logging.getLogger(__name__)


@_apsw_errors_mapped
class Connection:
    """The SQLite index file: opening it, its transactions and writer lock, its meta; the state a
    transaction carries for the layers above, and the hooks its commit calls."""

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
    def open(cls, path: Path, repo: str = "", lock_wait: float = 30.0) -> Self:
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
            db = Connection._connect_read_only(path)
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
    def rebuilding(self) -> Iterator[Self]:
        """A new, empty index beside this one for a rebuild. When the block ends without error,
        its content replaces this index's in one transaction (SQLite's backup API), so readers
        see the old index or the new, never neither; a killed or failed rebuild leaves the old.
        The caller holds the writer lock."""
        if self.read_only:
            raise _write_error(self.path, apsw.ReadOnlyError("the index file is read-only"))
        beside = self.path.with_name(self.path.name + ".rebuild")
        type(self).remove(beside)  # what a killed rebuild left
        fresh = type(self).open(beside, self.repo)
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
            type(self).remove(beside)

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
                type(self).remove(self.path.with_name(self.path.name + ".rebuild"))
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

    def _next_ids(self, table: str, n: int) -> list[int]:
        """`n` row ids for new rows of `table` (one of ours, INTEGER PRIMARY KEY without
        AUTOINCREMENT): those SQLite would give, one past the largest; the caller holds the write."""
        if not n:  # most files define no symbols and many add no new vector: no query
            return []
        first = int(self._db.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").get)  # noqa: S608 — our table names
        if table == "chunks":  # a chunk id the kept postings name is never given again
            first = max(first, self._kept_through() + 1)
        return list(range(first, first + n))

    # ---- keyword postings without positions (a large index; kept_postings.py) --------------

    def _kept_through(self) -> int:
        """The largest chunk id whose keyword rows moved to the kept postings; 0: none moved."""
        return self._kept_through_of(self._db)

    def _filter(self, filters: Filters) -> tuple[str, list[object]]:
        return _filter_sql(filters, "f", self.repo)

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        with self._use, self._db:
            yield

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

    @staticmethod
    def _kept_through_of(db: apsw.Connection) -> int:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (KEPT_THROUGH,)).fetchone()
        return int(row[0]) if row else 0

    # ---- what a commit asks of the layers above (each overrides its own) --------------------

    def _finish_vectors(self) -> None:
        """Before a commit: what the vector layer staged (sign pages, the switch to the compact form)."""

    def _move_keywords_if_due(self) -> None:
        """Before a commit: the keyword layer's move of FTS5's rows, when due."""

    def _repack(self) -> None:
        """After a commit that turned the index compact: the file rewritten smaller."""
