"""Plain records that flow through the pipeline: scan → chunk → store → search."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple


class FileKind(str, Enum):
    CODE = "code"
    TEST = "test"
    DOCS = "docs"
    CONFIG = "config"


class SkipReason(str, Enum):
    IGNORED = "ignored"  # .gitignore / .codewhereignore
    BUILTIN_DIR = "builtin-dir"  # node_modules, .git, build, ...
    LOCKFILE = "lockfile"
    TOO_LARGE = "too-large"
    BINARY = "binary"
    ASSET = "asset"  # media, archives, compiled output: by extension
    SYMLINK_OUTSIDE_ROOT = "symlink-outside-root"
    SYMLINK_LOOP = "symlink-loop"
    SYMLINK_DUPLICATE = "symlink-duplicate"  # target is inside the root and indexed under its own path
    BROKEN_SYMLINK = "broken-symlink"
    UNREADABLE = "unreadable"
    NOT_REGULAR = "not-regular"  # fifo, socket, device
    TOO_COMPLEX = "too-complex"  # nested too deep, or too slow, to parse in bounded time (fuzz fixtures)
    NAME_NOT_UTF8 = "name-not-utf8"  # a file or folder name that is not UTF-8 (Latin-1 fixtures): kept out whole
    MINIFIED = "minified"  # *.min.js, *.min.css, source maps, lines averaging over 300 characters


@dataclass(frozen=True)
class FileRecord:
    path: str  # relative to the root, "/" separators
    kind: FileKind
    language: str  # "" when unknown
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Skip:
    path: str
    reason: SkipReason
    detail: str = ""  # for IGNORED: the ignore file, line and pattern that decided


@dataclass(frozen=True)
class Symbol:
    """A definition found by the parser. Lines are 1-based and inclusive."""

    name: str
    qualified_name: str  # `Session.resolve_redirects`
    kind: str  # function, method, class, struct, interface, trait, enum, module, type
    start_line: int
    end_line: int
    signature: str = ""
    doc: str = ""
    decorators: tuple[str, ...] = ()
    parent: str = ""  # qualified name of the enclosing symbol, "" at module level


class EdgeKind(str, Enum):
    CALL = "call"
    IMPORT = "import"
    INHERIT = "inherit"


@dataclass(frozen=True)
class Edge:
    """A reference from one place to a name; resolved to a symbol later, across files."""

    kind: EdgeKind
    source: str  # qualified name of the enclosing symbol, "" at module level
    target: str  # the name as written (last segment)
    line: int


class Unit(NamedTuple):
    """A definition as the answer unit: a function, method or class with its decorators and the
    doc comment above it. A hit of any chunk of it (a long function's windows too) reports it."""

    start_line: int
    end_line: int
    name: str  # qualified: `Session.resolve_redirects`


@dataclass(frozen=True)
class Chunk:
    """The unit of retrieval. Line numbers are 1-based and inclusive."""

    path: str
    start_line: int
    end_line: int
    text: str
    embed_text: str
    kind: FileKind
    language: str
    content_hash: str
    defines: tuple[str, ...] = ()  # names this chunk defines (def/class/func ...), as written
    embed: bool = True  # False for chunks of only imports and assignments: keyword-searchable, not embedded
    mentions: tuple[str, ...] = ()  # documentation only: code names its prose names, where its evidence points
    unit: Unit | None = None  # the definition this chunk belongs to: what a hit of it reports


@dataclass(frozen=True)
class ModelInfo:
    """What an index records of the model that built it; a different fingerprint is a different model."""

    id: str  # how the user names it: "default", a folder, a Hugging Face id
    dim: int
    fingerprint: str  # hash of the weights: same id, other weights → refused


class Mode(str, Enum):
    KEYWORD = "keyword"
    SEMANTIC = "semantic"
    HYBRID = "hybrid"


@dataclass(frozen=True)
class Filters:
    """Which chunks a search may return."""

    scopes: tuple[str, ...] = ()  # path prefixes, relative to the root
    exclude_kinds: tuple[FileKind, ...] = ()
    repos: tuple[str, ...] = ()  # repository names in a shared store; empty: every repository

    def is_empty(self) -> bool:
        return not self.scopes and not self.exclude_kinds and not self.repos


@dataclass(frozen=True)
class TermQuery:
    """Tokens to look up in a keyword index, and how they must occur; each store writes its own syntax.

    `any`: at least one term; `all`: every term; `phrase`: the terms in order, adjacent;
    `name`: the one term equals a symbol's compound name.
    """

    terms: tuple[str, ...]
    match: str = "any"
    field_weights: tuple[float, float] = (1.0, 1.0)  # how much a match counts in a chunk's (path, text)


class ChunkRow(NamedTuple):
    """A chunk as a store reads it back: what the ranking reads and what a hit shows. A named
    tuple: cheap to build for every candidate of every query, and kept as it is by a warm reader."""

    chunk_id: int
    path: str
    start_line: int
    end_line: int
    kind: FileKind
    language: str
    text: str
    repo: str = ""  # the repository's name in a shared store; empty in a one-folder index
    defines: tuple[str, ...] = ()  # compound names the chunk defines
    mentions: tuple[str, ...] = ()  # documentation: code names its prose mentions
    spelled: tuple[str, ...] = ()  # the names it defines as written (`Helpers`), beside `defines`
    unit: Unit | None = None  # the definition it belongs to, if any


@dataclass(frozen=True)
class Ranked:
    """A chunk's place in a ranking: its score, why it is there (each retriever's rank, each
    signal's factor), and its row once one was read."""

    chunk_id: int
    score: float
    why: Mapping[str, object]
    row: ChunkRow | None = None


@dataclass(frozen=True)
class Hit:
    path: str
    start_line: int
    end_line: int
    score: float
    kind: FileKind
    language: str
    snippet: str
    why: dict[str, object] = field(default_factory=dict)
    repo: str = ""
    symbol: str = ""  # the definition the range is (`Session.resolve_redirects`); "" for a window of no definition
    snippet_line: int = 0  # the line number of the snippet's first line (0: not known)


@dataclass(frozen=True)
class SymbolRow:
    """A stored symbol, as graph questions return it."""

    id: int
    path: str
    name: str
    qualified_name: str
    kind: str
    start_line: int
    end_line: int
    signature: str
    doc: str
    parent: str
    language: str

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


class SymbolRef(NamedTuple):  # tuples: edge resolution makes one per symbol and per edge
    id: int
    file_id: int
    name: str
    kind: str
    parent: str = ""


class EdgeRow(NamedTuple):
    id: int
    file_id: int
    kind: str
    target_name: str
    source_parent: str = ""  # the class of the calling method: `self.x()` prefers that class's x


class EdgeSite(NamedTuple):
    """An edge where it is written, for matching precise answers to it."""

    id: int
    path: str
    line: int
    target_name: str
    kind: str


class SymbolSpan(NamedTuple):
    id: int
    path: str
    name: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class EdgeHit:
    kind: str
    source_id: int | None
    target_id: int | None
    target_name: str
    resolution: str
    path: str
    line: int
