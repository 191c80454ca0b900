"""The only place with SQL. `open_store` picks the backend; callers see the `Store` protocol."""

from __future__ import annotations

from pathlib import Path

from codewhere.config import Settings
from codewhere.errors import IndexFileError
from codewhere.languages import SKIPPED_DIRS
from codewhere.store.base import ChunkAt, FileState, Store, StoreStats
from codewhere.store.sqlite import SqliteStore

STORES = ("sqlite", "postgres")


def open_store(settings: Settings, root: Path, index_path: Path | None = None, rebuild: bool = False) -> Store:
    """Open the index of the folder `root`: a SQLite file (`index_path`, else one in the cache
    dir), or the repository `settings.repo` (default: the folder's name) in the PostgreSQL
    database `settings.dsn`. `rebuild` forgets what the index held for this folder first."""
    kind = settings.store_kind
    repo = settings.repo or root.name or "root"
    if kind == "sqlite":
        return _open_sqlite(settings, root, index_path, repo, rebuild)
    if kind == "postgres":
        if not settings.dsn:
            raise IndexFileError("the postgres store needs a database", "set CODEWHERE_DSN=postgresql://user@host/dbname")
        try:
            from codewhere.store.postgres import PostgresStore  # psycopg is an optional dependency
        except ImportError as exc:
            raise IndexFileError(
                "the postgres store needs psycopg, which is not installed", "pip install 'codewhere[postgres]'"
            ) from exc

        store = PostgresStore.open(settings.dsn, repo)
        if rebuild:
            store.forget_repository()
        return store
    raise IndexFileError(f"unknown store {kind!r}", f"use one of: {', '.join(STORES)}")


def _in_skipped_dir(relative: Path) -> bool:
    return any(part in SKIPPED_DIRS for part in relative.parts[:-1])


def _open_sqlite(settings: Settings, root: Path, index_path: Path | None, repo: str, rebuild: bool) -> SqliteStore:
    file = index_path.expanduser().resolve() if index_path else settings.index_path_for(root)
    if not index_path and file.is_relative_to(root) and not _in_skipped_dir(file.relative_to(root)):
        # `~/.cache/...` under a search of `~` is fine: the scanner never enters `.cache`
        raise IndexFileError(f"the cache dir {settings.cache_dir} is inside {root}", "set CODEWHERE_CACHE_DIR elsewhere")
    if rebuild and file.exists():
        if not (SqliteStore.is_codewhere_index(file) or file.is_relative_to(settings.cache_dir.resolve())):
            raise IndexFileError(f"{file} is not a codewhere index", "codewhere only deletes its own files; remove it yourself")
        SqliteStore.remove(file)
    return SqliteStore.open(file, repo)


__all__ = ["STORES", "ChunkAt", "FileState", "SqliteStore", "Store", "StoreStats", "open_store"]
