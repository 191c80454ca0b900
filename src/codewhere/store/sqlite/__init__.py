"""The SQLite index: one file holding files, chunks, the FTS5 keyword index, vectors and metadata.

Only this package speaks SQL. Writes happen inside `transaction()` blocks so a killed indexer
leaves the last committed state; WAL lets searches read while an indexer writes.

The store is one class built in layers, one module each, every layer using only those below it:
`schema` (layout, constants, error mapping) → `connection` (opening, transactions, meta) →
`vectors` (the model's vectors and the compact form) → `tier_vectors` (the quality tier) →
`keywords` (FTS5 and the kept postings) → `writer` (files, chunks, symbols, edges) → `graph` (the
graph questions) → `rows` (chunk rows for search and the warm reader). A transaction's commit
calls the hooks the vector and keyword layers define (`_finish_vectors`, `_move_keywords_if_due`,
`_repack`).
"""

from __future__ import annotations

from codewhere.store.sqlite.rows import Rows
from codewhere.store.sqlite.schema import SCHEMA_VERSION, _varint_sum, fts5_expression


class SqliteStore(Rows):
    """One folder's index in one SQLite file (the embedded default)."""


__all__ = ["SCHEMA_VERSION", "SqliteStore", "_varint_sum", "fts5_expression"]
