"""Chunk rows as search reads them, and what a warm reader reads (store/warm.py)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np

from codewhere.store.base import (
    ChunkAt,
    StoreStats,
    chunk_row,
    grouped,
    spelled_keys,
    targets_with_resolution,
)
from codewhere.store.sqlite.graph import Graph
from codewhere.store.sqlite.schema import (
    _CALL_TARGETS_SQL,
    _CANDIDATE_SQL,
    _FILE_CHUNKS_SQL,
    _FILE_HASH,
    _FILE_ID,
    _PATH,
    _TEXT,
    _TEXT_AT,
    _TEXT_LEN,
    ROW_PAGE,
    _apsw_errors_mapped,
)
from codewhere.types import (
    ChunkRow,
    Filters,
)

log = logging.getLogger(__name__)


@_apsw_errors_mapped
class Rows(Graph):
    """Chunk rows as search reads them, and what a warm reader reads (store/warm.py)."""

    # ---- what a warm reader reads (store/warm.py) -----------------------------------------

    def change_token(self) -> object:
        # data_version moves when another connection commits, total_changes when this one writes
        return self._db.execute("PRAGMA data_version").get, self._db.total_changes(), self._swaps

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

    def repositories(self, named: Sequence[str] | None = None) -> list[str]:
        return [self.repo] if named is None else [name for name in named if name == self.repo]

    def stats(self) -> StoreStats:
        db = self._db
        files, size = db.execute("SELECT count(*), coalesce(sum(size), 0) FROM files WHERE skip_reason IS NULL").get
        chunks = db.execute("SELECT count(*) FROM chunks").get
        skipped = dict(db.execute("SELECT skip_reason, count(*) FROM files WHERE skip_reason IS NOT NULL GROUP BY 1"))
        kinds = dict(db.execute("SELECT kind, count(*) FROM files WHERE skip_reason IS NULL GROUP BY 1"))
        langs = dict(db.execute("SELECT language, count(*) FROM files WHERE skip_reason IS NULL GROUP BY 1 ORDER BY 2 DESC"))
        return StoreStats(files, chunks, size, skipped, kinds, langs, self.meta())

