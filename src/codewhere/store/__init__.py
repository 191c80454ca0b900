"""The only place with SQL. `open_store` picks the backend; callers see `SqliteStore`'s methods."""

from codewhere.store.sqlite import FileState, SqliteStore, StoreStats

__all__ = ["FileState", "SqliteStore", "StoreStats"]
