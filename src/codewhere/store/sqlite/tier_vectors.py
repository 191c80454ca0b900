"""The quality tier: a second model's vectors beside the default's (tier.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import cast

import numpy as np

from codewhere.store.sqlite.schema import _TIER_SCHEMA, TIER_COMPLETE, _apsw_errors_mapped, _hash_key, _hash_text
from codewhere.store.sqlite.vectors import Vectors
from codewhere.types import (
    ModelInfo,
)

log = logging.getLogger(__name__)


@_apsw_errors_mapped
class TierVectors(Vectors):
    """The quality tier: a second model's vectors beside the default's (tier.py)."""

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

