"""Where things live and the knobs that pick behaviour.

Each setting comes from, in rising precedence: the built-in default, `codewhere.toml` in the user
config dir, `codewhere.toml` at the indexed folder's root, a `CODEWHERE_*` env var, a flag.
`Settings.sources` remembers which one won, for `codewhere config`.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import platformdirs

from codewhere.errors import CodewhereError
from codewhere.scan import GITIGNORE_MODES, ScanOptions

CONFIG_FILE = "codewhere.toml"


class ConfigError(CodewhereError):
    pass


def redact_dsn(dsn: str) -> str:
    """A PostgreSQL connection string without its password, for messages and `codewhere config`."""
    if "://" in dsn:
        parts = urlsplit(dsn)
        if parts.password:
            return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))
        return dsn
    return re.sub(r"password\s*=\s*\S+", "password=***", dsn)


@dataclass(frozen=True)
class Option:
    name: str  # the Settings field
    section: str  # the TOML table
    key: str  # the TOML key
    env: str | None
    kind: type


OPTIONS: tuple[Option, ...] = (
    Option("cache_dir", "index", "cache_dir", "CODEWHERE_CACHE_DIR", Path),
    Option("lock_wait_seconds", "index", "lock_wait_seconds", "CODEWHERE_LOCK_WAIT", float),
    Option("chunker", "index", "chunker", "CODEWHERE_CHUNKER", str),
    Option("include_minified", "index", "include_minified", "CODEWHERE_INCLUDE_MINIFIED", bool),
    Option("confirm_large", "index", "confirm_large", "CODEWHERE_CONFIRM_LARGE", bool),
    Option("gitignore", "index", "gitignore", "CODEWHERE_GITIGNORE", str),
    Option("shared_vectors", "index", "shared_vectors", "CODEWHERE_SHARED_VECTORS", bool),
    Option("quality", "index", "quality", "CODEWHERE_QUALITY", bool),
    Option("workers", "index", "workers", "CODEWHERE_WORKERS", int),
    Option("store", "index", "store", "CODEWHERE_STORE", str),
    Option("dsn", "index", "dsn", "CODEWHERE_DSN", str),
    Option("read_dsn", "index", "read_dsn", "CODEWHERE_READ_DSN", str),
    Option("repo", "index", "repo", "CODEWHERE_REPO", str),
    Option("route_repositories", "search", "route_repositories", "CODEWHERE_ROUTE_REPOSITORIES", int),
    Option("model", "embedder", "model", "CODEWHERE_MODEL", str),
    Option("models_dir", "embedder", "models_dir", "CODEWHERE_MODELS_DIR", Path),
    Option("max_seq_length", "embedder", "max_seq_length", "CODEWHERE_MAX_SEQ_LENGTH", int),
    Option("embed_base_url", "embedder", "base_url", "CODEWHERE_EMBED_BASE_URL", str),
    Option("embed_api_key_env", "embedder", "api_key_env", "CODEWHERE_EMBED_API_KEY_ENV", str),
    Option("embed_batch_size", "embedder", "batch_size", None, int),
    Option("embed_timeout_seconds", "embedder", "timeout_seconds", None, float),
    Option("reranker", "reranker", "model", "CODEWHERE_RERANKER", str),
    Option("rerank_top_n", "reranker", "top_n", "CODEWHERE_RERANK_TOP_N", int),
    Option("ranking_file", "ranking", "params_file", "CODEWHERE_RANKING_PARAMS", Path),
    Option("scip_file", "graph", "scip", "CODEWHERE_SCIP", Path),
    Option("precise", "graph", "precise", "CODEWHERE_PRECISE", bool),
    Option("lsp", "graph", "lsp", "CODEWHERE_LSP", bool),
)


@dataclass(frozen=True)
class Settings:
    cache_dir: Path
    lock_wait_seconds: float = 30.0
    model: str | None = None  # None: the index's own model, else the built-in default
    models_dir: Path | None = None  # where built models live; default: the user cache dir's models/
    chunker: str = "symbols"  # "symbols" (where a grammar exists) or "lines"
    include_minified: bool = False  # index *.min.js, source maps and files of very long lines too
    confirm_large: bool = True  # ask before a first index of a big folder outside a git repository (guard.py)
    gitignore: str = "auto"  # apply .gitignore: "auto" (inside a git repository), "always", "never"
    shared_vectors: bool = True  # take vectors other indexes on this machine made (cache_dir/vectors/)
    quality: bool = False  # the quality tier (tier.py): MiniLM's vectors filled beside the static ones
    workers: int | None = None  # processes reading and chunking files; None: one per core
    store: str | None = None  # "sqlite" or "postgres"; None: postgres when a DSN is set, else sqlite
    dsn: str | None = None  # PostgreSQL connection string of a shared (team) index: its primary, where indexers write
    # where searches and graph questions read: libpq's multi-host form names replicas, e.g.
    # postgresql://r1,r2,primary/code?target_session_attrs=prefer-standby&load_balance_hosts=random
    read_dsn: str | None = None
    repo: str | None = None  # the repository's name in a shared index; default: the folder's name
    # a search across a shared index of more repositories than this reads only this many: those
    # whose files hold its words best (docs/team.md); 0 reads every one
    route_repositories: int = 20
    max_seq_length: int | None = None  # transformer embedders: tokens per chunk (default: the model's)
    embed_base_url: str = "http://localhost:11434/v1"  # openai:MODEL embedders
    embed_api_key_env: str | None = None  # the NAME of the env var holding the endpoint's key
    embed_batch_size: int = 64
    embed_timeout_seconds: float = 60.0
    reranker: str | None = None  # a cross-encoder re-scoring the top candidates; None: off
    rerank_top_n: int = 50
    ranking_file: Path | None = None  # a TOML file whose [ranking] table overrides ranking parameters (fits, experiments)
    scip_file: Path | None = None  # a SCIP index to merge into the graph (relative: to the indexed folder)
    precise: bool = False  # resolve Python call sites with jedi at each index run
    lsp: bool = False  # ask the installed language servers about call sites at each index run
    sources: dict[str, str] = field(default_factory=dict, compare=False)  # setting → where it came from

    @property
    def model_cache(self) -> Path:
        """Not under cache_dir: CODEWHERE_CACHE_DIR moves indexes, and the built model stays put."""
        return self.models_dir or Path(platformdirs.user_cache_dir("codewhere")) / "models"

    @property
    def scan_options(self) -> ScanOptions:
        if self.gitignore not in GITIGNORE_MODES:
            raise ConfigError(f"index.gitignore is {self.gitignore!r}", f"use one of: {', '.join(GITIGNORE_MODES)}")
        return ScanOptions(include_minified=self.include_minified, gitignore=self.gitignore)

    @property
    def store_kind(self) -> str:
        return self.store or ("postgres" if self.dsn else "sqlite")

    @classmethod
    def from_env(cls) -> Settings:
        return cls.load(None)

    @classmethod
    def load(cls, root: Path | None) -> Settings:
        """Defaults < user config file < the root's codewhere.toml < env vars."""
        settings = cls(cache_dir=Path(platformdirs.user_cache_dir("codewhere")))
        sources = {o.name: "default" for o in OPTIONS}
        files = [Path(platformdirs.user_config_dir("codewhere")) / CONFIG_FILE]
        if root is not None:
            files.append(root / CONFIG_FILE)
        for file in files:
            if file.is_file():
                settings = _apply_file(settings, file, sources)
        for option in OPTIONS:
            if option.env and (raw := os.environ.get(option.env)):
                settings = _with(settings, option.name, _convert(option, raw, f"${option.env}"))
                sources[option.name] = f"env {option.env}"
        return replace(settings, sources=sources)

    def with_flags(self, **values: object) -> Settings:
        """Command-line values (None: not given) over everything else."""
        given = {k: v for k, v in values.items() if v is not None}
        if not given:
            return self
        changed = replace(self, sources={**self.sources, **{k: "flag" for k in given}})
        for name, value in given.items():
            changed = _with(changed, name, value)
        return changed

    def index_path_for(self, root: Path) -> Path:
        """One index per absolute root path, in the cache dir: nothing is written in the repo."""
        digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
        name = re.sub(r"[^\w.-]", "_", root.name) or "root"
        return self.cache_dir / "indexes" / f"{name}-{digest}.sqlite"

    def effective(self) -> list[tuple[str, str, object, str]]:
        """(section.key, env var, value, source) of every setting, for `codewhere config`."""
        out = []
        for option in OPTIONS:
            value = getattr(self, option.name)
            if option.name in ("dsn", "read_dsn") and isinstance(value, str):
                value = redact_dsn(value)
            out.append((f"{option.section}.{option.key}", option.env or "", value, self.sources.get(option.name, "default")))
        return out


def _convert(option: Option, raw: object, where: str) -> object:
    try:
        if option.kind is Path:
            return Path(str(raw)).expanduser()
        if option.kind is bool:
            if isinstance(raw, bool):
                return raw
            lowered = str(raw).strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(raw)
        if option.kind is str:
            if not isinstance(raw, str):
                raise TypeError
            return raw
        return option.kind(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"{option.section}.{option.key} in {where} must be {option.kind.__name__}, got {raw!r}", "fix the value"
        ) from exc


def _with(settings: Settings, name: str, value: object) -> Settings:
    """`settings` with one field set by name (the field's type was checked by _convert)."""
    fields: dict[str, Any] = {name: value}
    return replace(settings, **fields)


def _apply_file(settings: Settings, file: Path, sources: dict[str, str]) -> Settings:
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {file}: {exc}", "fix the TOML syntax or remove the file") from exc
    known = {(o.section, o.key): o for o in OPTIONS}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{file}: `{section}` must be a table like [{section}]", "see docs/guide.md, Configuration")
        for key, raw in table.items():
            option = known.get((section, key))
            if option is None:
                names = ", ".join(sorted(f"{s}.{k}" for s, k in known))
                raise ConfigError(f"{file}: unknown setting {section}.{key}", f"known settings: {names}")
            settings = _with(settings, option.name, _convert(option, raw, str(file)))
            sources[option.name] = str(file)
    return settings
