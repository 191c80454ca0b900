"""The embedding model's vectors: written, searched, and the compact form past QUANTIZE_FROM."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, cast

import apsw
import numpy as np

from codewhere.chunk import line_starts, text_offset
from codewhere.errors import (
    ModelError,
)
from codewhere.store import quantized
from codewhere.store.base import (
    grouped,
    nearest_chunks,
)
from codewhere.store.sqlite import schema
from codewhere.store.sqlite.connection import Connection
from codewhere.store.sqlite.schema import (
    _COMPACT_SCHEMA,
    COMPACT,
    QUANTIZE_PAGE,
    _apsw_errors_mapped,
    _hash_key,
    _hash_text,
    _sign_page,
    _sign_page_bytes,
    _stored_text,
)
from codewhere.types import (
    Filters,
    ModelInfo,
)

log = logging.getLogger(__name__)


@_apsw_errors_mapped
class Vectors(Connection):
    """The embedding model's vectors: written, searched, and the compact form past QUANTIZE_FROM."""

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
        pages, slots = np.divmod(ids, schema.SIGN_PAGE)
        for page in np.unique(pages).tolist():
            bits = self._staged_signs.get(page)
            if bits is None:
                row = self._db.execute("SELECT bits FROM vector_signs WHERE page = ?", (page,)).fetchone()
                bits = self._staged_signs[page] = bytearray(cast(bytes, row[0]) if row else bytes(_sign_page_bytes(width)))
            live, held = _sign_page(bits, width)
            on_page = pages == page
            held[slots[on_page]] = signs[on_page] if signs is not None else 0
            live[slots[on_page]] = signs is not None
            bits[:schema.SIGN_PAGE // 8] = np.packbits(live).tobytes()

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
        listed = ",".join("?" * len(wanted)) if len(wanted) <= schema._LISTED_IDS else "SELECT value FROM json_each(?)"
        return [(int(e), int(c)) for e, c in self._db.execute(
            f"""SELECT e.id, c.id FROM embeddings e JOIN chunks c ON c.content_hash = e.content_hash
               WHERE e.id IN ({listed})""",
            wanted if len(wanted) <= schema._LISTED_IDS else (json.dumps(wanted),),
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
        live, signs = np.zeros((count, schema.SIGN_PAGE // 8), np.uint8), np.zeros((count, schema.SIGN_PAGE * width), np.uint8)
        for page, bits in pages:
            raw = np.frombuffer(cast(bytes, bits), np.uint8)
            live[cast(int, page) - first], signs[cast(int, page) - first] = raw[:schema.SIGN_PAGE // 8], raw[schema.SIGN_PAGE // 8:]
        return np.unpackbits(live, axis=1).astype(bool).reshape(-1), signs.reshape(count * schema.SIGN_PAGE, width)

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
            first = int(ids[0]) // schema.SIGN_PAGE if len(ids) else 0
            _, signs = self._sign_pages(first, int(ids[-1]) // schema.SIGN_PAGE if len(ids) else first)
        words = quantized.sign_words(signs[ids - first * schema.SIGN_PAGE])
        return ids, quantized.QuantizedVectors(words, held.codes, held.scales, held.norms)

    def _codes_after(self, after_id: int, limit: int) -> tuple[np.ndarray, quantized.QuantizedVectors]:
        return self._coded(self._db.execute(
            "SELECT id, scale, norm, codes FROM vector_codes WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit)
        ).fetchall())

