"""The only place with SQL. `open_store` picks the backend; callers see the protocol of their
role (store/base.py): the indexer an IndexWriter, search a SearchReader, graph questions a
GraphReader; `Index` holds the whole Store."""

from __future__ import annotations

from pathlib import Path

from codewhere.config import Settings
from codewhere.errors import ForeignFileError, IndexBusyError, IndexFileError, NotIndexedError
from codewhere.languages import SKIPPED_DIRS
from codewhere.locks import index_writer_lock
from codewhere.store.base import ChunkAt, FileStamp, FileState, GraphReader, IndexWriter, SearchReader, Store, StoreStats
from codewhere.store.source_text import SourceTexts
from codewhere.store.sqlite import SqliteStore

STORES = ("sqlite", "postgres")


def open_store(
    settings: Settings, root: Path, index_path: Path | None = None, rebuild: bool = False, create: bool = True
) -> Store:
    """Open the index of the folder `root`: a SQLite file (`index_path`, else one in the cache
    dir), or the repository `settings.repo` (default: the folder's name) in the PostgreSQL
    database `settings.dsn`.

    Opening never deletes what an index holds: a rebuild happens in `Store.rebuilding()`, under
    the writer lock. `rebuild` only allows replacing a SQLite file of ours that cannot be opened
    at all (corrupt, truncated), since nobody can read it. Without `create`, a missing SQLite
    index is an error (NotIndexedError) and nothing is written."""
    kind = settings.store_kind
    repo = settings.repo or root.name or "root"
    if kind == "sqlite":
        return _open_sqlite(settings, root, index_path, repo, rebuild, create)
    if kind == "postgres":
        if not settings.dsn:
            raise IndexFileError("the postgres store needs a database", "set CODEWHERE_DSN=postgresql://user@host/dbname")
        try:
            from codewhere.store.postgres import (
                PostgresStore,  # psycopg is an optional dependency
            )
        except ImportError as exc:
            raise IndexFileError(
                "the postgres store needs psycopg, which is not installed", "pip install 'codewhere[postgres]'"
            ) from exc

        return PostgresStore.open(settings.dsn, repo, settings.read_dsn)
    raise IndexFileError(f"unknown store {kind!r}", f"use one of: {', '.join(STORES)}")


def _in_skipped_dir(relative: Path) -> bool:
    return any(part in SKIPPED_DIRS for part in relative.parts[:-1])


def _open_sqlite(
    settings: Settings, root: Path, index_path: Path | None, repo: str, rebuild: bool, create: bool
) -> SqliteStore:
    file = index_path.expanduser().resolve() if index_path else settings.index_path_for(root)
    if not index_path and file.is_relative_to(root) and not _in_skipped_dir(file.relative_to(root)):
        # `~/.cache/...` under a search of `~` is fine: the scanner never enters `.cache`
        raise IndexFileError(f"the cache dir {settings.cache_dir} is inside {root}", "set CODEWHERE_CACHE_DIR elsewhere")
    if not create and not file.exists():
        raise NotIndexedError(f"{root} has not been indexed yet (its index would be {file})",
                              f"run `codewhere index {root}`")
    try:
        return _reading(SqliteStore.open(file, repo, settings.lock_wait_seconds), root)
    except (IndexBusyError, ForeignFileError):
        raise
    except IndexFileError as exc:
        ours = file.is_relative_to(settings.cache_dir.resolve()) or SqliteStore.is_codewhere_index(file)
        if rebuild and file.exists() and not ours:  # never delete a file that may be the user's
            raise IndexFileError(f"{file} cannot be opened and does not read as a codewhere index",
                                 f"if it was one, delete it (rm {file}) and index again; else pass another --index") from exc
        if not (rebuild and file.exists() and ours):
            if index_path and "--rebuild" in exc.hint:  # the rebuild that works names the same file
                raise IndexFileError(exc.message, exc.hint.replace("--rebuild", f"--rebuild --index {file}")) from exc
            raise
    with index_writer_lock(file, settings.lock_wait_seconds):  # an unreadable file of ours, replaced on request
        SqliteStore.remove(file)
    return _reading(SqliteStore.open(file, repo, settings.lock_wait_seconds), root)


def _reading(store: SqliteStore, root: Path) -> SqliteStore:
    store.sources = SourceTexts(root)
    return store


__all__ = [
    "STORES", "ChunkAt", "FileStamp", "FileState", "GraphReader", "IndexWriter", "SearchReader", "SqliteStore", "Store", "StoreStats",
    "open_store",
]
