"""Where things live and the knobs that pick behaviour: defaults < CODEWHERE_* env < flags."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import platformdirs


@dataclass(frozen=True)
class Settings:
    cache_dir: Path
    lock_wait_seconds: float = 30.0
    model: str | None = None  # None: the index's own model, else the built-in default
    models_dir: Path | None = None  # where built models live; default: <cache_dir>/models
    chunker: str = "symbols"  # "symbols" (where a grammar exists) or "lines"
    store: str | None = None  # "sqlite" or "postgres"; None: postgres when a DSN is set, else sqlite
    dsn: str | None = None  # PostgreSQL connection string of a shared (team) index
    repo: str | None = None  # the repository's name in a shared index; default: the folder's name

    @property
    def store_kind(self) -> str:
        return self.store or ("postgres" if self.dsn else "sqlite")

    @property
    def model_cache(self) -> Path:
        return self.models_dir or self.cache_dir / "models"

    @classmethod
    def from_env(cls) -> Settings:
        cache = os.environ.get("CODEWHERE_CACHE_DIR") or platformdirs.user_cache_dir("codewhere")
        settings = cls(cache_dir=Path(cache))
        if wait := os.environ.get("CODEWHERE_LOCK_WAIT"):
            settings = replace(settings, lock_wait_seconds=float(wait))
        if models := os.environ.get("CODEWHERE_MODELS_DIR"):
            settings = replace(settings, models_dir=Path(models))
        if chunker := os.environ.get("CODEWHERE_CHUNKER"):
            settings = replace(settings, chunker=chunker)
        if model := os.environ.get("CODEWHERE_MODEL"):
            settings = replace(settings, model=model)
        if store := os.environ.get("CODEWHERE_STORE"):
            settings = replace(settings, store=store)
        if dsn := os.environ.get("CODEWHERE_DSN"):
            settings = replace(settings, dsn=dsn)
        if repo := os.environ.get("CODEWHERE_REPO"):
            settings = replace(settings, repo=repo)
        return settings

    def index_path_for(self, root: Path) -> Path:
        """One index per absolute root path, in the cache dir: nothing is written in the repo."""
        digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
        name = re.sub(r"[^\w.-]", "_", root.name) or "root"
        return self.cache_dir / "indexes" / f"{name}-{digest}.sqlite"
