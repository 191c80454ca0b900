"""Vectors shared by every index on this machine, by model and chunk text.

Worktrees and clones of one repository hold mostly the same code: each gets an index of its
own, but a chunk text one of them embedded is not embedded again by the next. One SQLite file
per model (by fingerprint) in the cache dir maps a text's content hash to its vector, exactly as
the model made it (float32 bytes), so a vector from the cache ranks as one just computed.

The cache only saves work: a file that cannot be opened or written (read-only, full disk,
another process holding it too long) means embedding as without it, said once.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

import apsw
import numpy as np

from codewhere.types import ModelInfo

log = logging.getLogger(__name__)

BUSY_MS = 5_000  # another indexer writing its vectors: wait this long, then go on without the cache
_said: set[str] = set()


class SharedVectors:
    def __init__(self, path: Path, info: ModelInfo) -> None:
        self.path = path
        self.dim = info.dim
        self._db: apsw.Connection | None = None

    @classmethod
    def for_model(cls, cache_dir: Path, info: ModelInfo) -> SharedVectors:
        digest = hashlib.blake2b(info.fingerprint.encode(), digest_size=8).hexdigest()
        return cls(cache_dir / "vectors" / f"{digest}-{info.dim}.sqlite", info)

    def _connection(self) -> apsw.Connection | None:
        if self._db is None and str(self.path) not in _said:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = apsw.Connection(str(self.path))
                db.setbusytimeout(BUSY_MS)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                # a rowid table: a WITHOUT ROWID row of 1 KB spills into overflow pages (4x the size)
                db.execute("CREATE TABLE IF NOT EXISTS vectors(id INTEGER PRIMARY KEY, content_hash TEXT NOT NULL UNIQUE,"
                           " vector BLOB NOT NULL)")
                self._db = db
            except (OSError, apsw.Error) as exc:
                self._give_up(exc)
        return self._db

    def _give_up(self, exc: BaseException) -> None:
        if str(self.path) not in _said:
            _said.add(str(self.path))
            log.warning("the shared vector cache %s is not usable (%s); embedding without it", self.path, exc)
        if self._db is not None:
            self._db.close()
            self._db = None

    def get(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors the cache holds for these texts."""
        db = self._connection()
        if db is None or not hashes:
            return {}
        try:
            rows = db.execute(
                "SELECT content_hash, vector FROM vectors WHERE content_hash IN (SELECT value FROM json_each(?))",
                (json.dumps(list(hashes)),),
            ).fetchall()
        except apsw.Error as exc:
            self._give_up(exc)
            return {}
        width = self.dim * 4
        return {str(h): np.frombuffer(v, np.float32) for h, v in rows if isinstance(v, bytes) and len(v) == width}

    def put(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        db = self._connection()
        if db is None or not len(hashes):
            return
        rows = [(h, np.asarray(v, np.float32).tobytes()) for h, v in zip(hashes, vectors, strict=True)]
        try:
            with db:
                db.executemany("INSERT OR IGNORE INTO vectors(content_hash, vector) VALUES(?, ?)", rows)
        except apsw.Error as exc:
            self._give_up(exc)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
