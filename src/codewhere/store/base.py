"""What every index store offers: the SQLite file of one folder, or a PostgreSQL database shared
by a team. Nothing above the store knows which one it talks to.

Write methods run inside `transaction()`; `writer_lock()` keeps two indexers of one repository
from interleaving. Reads never see a half-written file: a file's rows change in one transaction.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypedDict, TypeVar, runtime_checkable

import numpy as np

from codewhere.store.quantized import QuantizedVectors
from codewhere.tokens import compound
from codewhere.types import (
    Chunk,
    ChunkRow,
    Edge,
    EdgeHit,
    EdgeRow,
    EdgeSite,
    FileKind,
    FileRecord,
    Filters,
    ModelInfo,
    SkipReason,
    Symbol,
    SymbolRef,
    SymbolRow,
    SymbolSpan,
    TermQuery,
    Unit,
)


@dataclass(frozen=True)
class ChunkAt:
    id: int
    embed_text: str  # what to embed when the chunk has no vector of its own (imports only)
    vector: np.ndarray | None = None  # its stored vector


# (path, size, mtime_ns, skip reason): what a search's quick check compares with a stat, per
# indexed file; a plain tuple, as the database returns it (78k of them on the kernel)
FileStamp = tuple[str, int, int, str | None]


class FileState(NamedTuple):  # a tuple: a refresh builds one per file it may write
    size: int
    mtime_ns: int
    hash: str | None
    skip_reason: str | None


@dataclass(frozen=True)
class StoreStats:
    files: int
    chunks: int
    bytes: int
    skipped: dict[str, int]
    kinds: dict[str, int]
    languages: dict[str, int]
    meta: dict[str, str]


def like_escape(text: str) -> str:
    """`text` for a LIKE pattern with ESCAPE '\\': its own %, _ and backslashes match literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# an edge a precise source resolved, whose answer still holds: its target symbol exists (or it
# was found to reach no symbol). Name resolution leaves it alone; rewriting its file replaces it.
KEPT_PRECISE = """(e.resolution IN ('scip', 'lsp', 'jedi')
                   AND (e.target_id IS NULL OR EXISTS (SELECT 1 FROM symbols t WHERE t.id = e.target_id)))"""


class EdgeSource(NamedTuple):
    source_id: int
    kind: str
    path: str
    line: int
    resolution: str
    target_id: int


def edge_sources_sql(targets: str, kinds: str, file_join: str = "f.id = e.file_id", where: str = "") -> str:
    """(source id, edge kind, path, line, resolution, target id) of the call and inherit edges into
    a set of symbols: one level of an impact walk. `targets` and `kinds` are each store's list
    placeholders; `file_join` and `where` (`… AND `) what its keys add."""
    return f"""SELECT e.source_id, e.kind, f.path, e.line, e.resolution, e.target_id FROM edges e JOIN files f ON {file_join}
               WHERE {where}e.target_id IN ({targets}) AND e.kind IN ({kinds}) AND e.source_id IS NOT NULL
               ORDER BY f.path, e.line"""


K = TypeVar("K")
FILE_KINDS: dict[str, FileKind] = {kind.value: kind for kind in FileKind}  # faster than FileKind(value) per row
DEFINITION_SEPARATOR = "\x1f"  # between the (compound, as written) names of a chunk's definitions, read in one column


def definition_rows(defines: Sequence[str]) -> list[tuple[str, str]]:
    """(compound name, name as written) of each name a chunk defines, once each: a lookup by
    `raise_for_status` or `RaiseForStatus` finds both, and a name typed with a capital can still
    ask for its exact spelling."""
    return [(compound(name), name) for name in dict.fromkeys(defines)]


def spelled_keys(names: Sequence[str], spelled: Sequence[str]) -> list[str]:
    """The looked-up compound names that a name typed with a capital (`spelled`) stands for: those
    are defined only where a definition spells them exactly so."""
    return sorted({compound(name) for name in spelled} & set(names))


def split_definitions(joined: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(compound names, names as written) of a chunk, from `name || sep || spelled` rows joined by sep."""
    if not joined:
        return (), ()
    parts = joined.split(DEFINITION_SEPARATOR)
    return tuple(parts[0::2]), tuple(parts[1::2])


CHUNK_ROW_COLUMNS = """c.id, f.path, c.start_line, c.end_line, f.kind, f.language, c.text, {repo}, c.mentions,
                       {definitions}, c.unit_start, c.unit_end, c.unit_name, c.file_id"""


def chunk_text(stored: str | bytes) -> str:
    """A chunk's text as a store returns it: a compact SQLite index keeps it zlib-compressed."""
    return stored if isinstance(stored, str) else zlib.decompress(stored).decode()


def nearest_chunks(by_vector: dict[int, float], pairs: Iterable[tuple[int, int]], limit: int) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) of the chunks holding the nearest texts (`by_vector`: vector
    id → cosine distance; `pairs`: (vector id, chunk id)), by distance then chunk id: what a
    store's KNN answers."""
    found = sorted((by_vector[vid], cid) for vid, cid in pairs)
    return [(cid, 1.0 - d) for d, cid in found[:limit]]


def chunk_row(row: Sequence[Any]) -> ChunkRow:
    """A row of CHUNK_ROW_COLUMNS (each store fills in how it reads the repository's name and the
    joined definitions); its last column, the file id, is left out."""
    cid, path, start, end, kind, language, text, repo, mentions, names, unit_start, unit_end, unit_name = row[:13]
    defines, spelled = split_definitions(names)
    return ChunkRow(int(cid), path, start, end, FILE_KINDS[kind], language, chunk_text(text), repo, defines,
                    tuple((mentions or "").split()), spelled, stored_unit(unit_start, unit_end, unit_name))


def grouped(pairs: Iterable[tuple[K, Any]]) -> dict[K, list[int]]:
    """(key, id) rows → each key's ids, in row order."""
    out: dict[K, list[int]] = {}
    for key, value in pairs:
        out.setdefault(key, []).append(int(value))
    return out


def targets_with_resolution(rows: Iterable[tuple[Any, Any, str]]) -> dict[int, list[tuple[int, str]]]:
    """(source chunk, target chunk, resolution) rows → each source's (target, resolution) pairs, in row order."""
    out: dict[int, list[tuple[int, str]]] = {}
    for source, target, resolution in rows:
        out.setdefault(int(source), []).append((int(target), resolution))
    return out


def unit_columns(unit: Unit | None) -> tuple[int | None, int | None, str | None]:
    """A chunk's definition as the store's three columns (NULL: none)."""
    return (unit.start_line, unit.end_line, unit.name) if unit else (None, None, None)


def stored_unit(start: int | None, end: int | None, name: str | None) -> Unit | None:
    return Unit(int(start), int(end), name or "") if start is not None and end is not None else None


def smallest_chunk_by_line(chunks: Sequence[tuple[int, int, int]]) -> dict[int, int]:
    """line → id of the smallest of the (id, start, end) chunks holding it: where a symbol or a
    call of a file lives, recorded when the file is written so search needs no range join."""
    owner: dict[int, int] = {}
    for cid, start, end in sorted(chunks, key=lambda c: c[2] - c[1], reverse=True):
        for line in range(start, end + 1):
            owner[line] = cid
    return owner


class StoreInfo(Protocol):
    """What every role can say of its store."""

    location: str  # where the index lives, for messages (a file path, or a redacted DSN and repository)
    repo: str  # the repository this store writes (and, in a one-folder index, reads)
    shared: bool  # True when many repositories and many users share the store

    def meta(self) -> dict[str, str]: ...  # of this store's repository, and of the store's model
    def model(self) -> ModelInfo | None: ...


def path_bounds(path: str) -> tuple[str, str, str]:
    """(path, low, high): a stored path is `path` itself or lies under it as a folder when it
    equals the first or sorts strictly between the other two ('0' follows '/')."""
    return path, path + "/", path + "0"


class IndexWriter(StoreInfo, Protocol):
    """What the indexer writes: files with their chunks, symbols and edges, vectors, resolution."""

    def transaction(self) -> AbstractContextManager[None]: ...
    def writer_lock(self, wait_seconds: float) -> AbstractContextManager[None]: ...
    def set_meta(self, values: dict[str, str]) -> None: ...
    def bind_model(self, info: ModelInfo) -> None: ...
    def file_states(self, under: Sequence[str] | None = None) -> dict[str, FileState]: ...
    def file_stamps(self) -> list[FileStamp]: ...
    def symbols_in(self, paths: Sequence[str]) -> list[SymbolRef]: ...
    def move_edge_targets(self, moves: Sequence[tuple[int, int]]) -> None: ...
    def content_hashes_in(self, paths: Sequence[str]) -> set[str]: ...
    def forget_contents(self, paths: Sequence[str]) -> None: ...  # ahead of replace_file for each of them, same transaction
    def replace_file(
        self,
        record: FileRecord,
        digest: str,
        chunks: Sequence[Chunk],
        fts_rows: Sequence[tuple[str, str]],
        symbols: Sequence[Symbol] = (),
        symbol_fts_rows: Sequence[tuple[str, str, str]] = (),
        edges: Sequence[Edge] = (),
        text_at: Sequence[int] | None = None,
    ) -> list[int]: ...
    def record_skipped_file(self, record: FileRecord, reason: SkipReason) -> None: ...
    def update_file_stat(self, path: str, size: int, mtime_ns: int) -> None: ...
    def delete_files(self, paths: Iterable[str]) -> None: ...
    def clear_files(self) -> None: ...
    def expect_files(self, size: int) -> None: ...  # a hint: files of this many bytes are about to be written
    def chunks_without_vectors(self, limit: int, after_id: int = 0) -> list[tuple[int, str, str]]: ...

    def count_chunks_without_vectors(self, after_id: int = 0) -> int: ...
    def add_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> None: ...
    def delete_orphan_vectors(self, among: Sequence[str] | None = None) -> int: ...
    def resolution_inputs(
        self, names: Sequence[str] | None = None, paths: Sequence[str] = ()
    ) -> tuple[Iterable[EdgeRow], list[SymbolRef], set[tuple[int, str]]]: ...  # edges: read once, may be lazy
    def set_edge_targets(self, rows: Iterable[tuple[int, int | None, str]]) -> None: ...
    def edge_sites(self, paths: Sequence[str] | None = None) -> list[EdgeSite]: ...  # None: every file
    def symbol_spans(self, paths: Sequence[str]) -> list[SymbolSpan]: ...
    def resolution_counts(self, resolution: str) -> dict[str, int]: ...  # path → edges resolved so


class SearchReader(Protocol):
    """What search reads: the retrievers' lists and the rows of their candidates."""

    location: str
    repo: str
    shared: bool

    def keyword_search(self, query: TermQuery, limit: int, filters: Filters) -> list[tuple[int, float]]: ...
    def file_keyword_search(self, query: TermQuery, limit: int, filters: Filters) -> dict[tuple[str, str], float]: ...
    def vector_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[tuple[int, float]]: ...
    def chunks_defining_names(
        self, names: Sequence[str], filters: Filters, spelled: Sequence[str] = ()
    ) -> dict[str, list[int]]: ...
    def chunk_rows(self, ids: Sequence[int], filters: Filters) -> dict[int, ChunkRow]: ...
    def call_target_chunks(self, chunk_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]: ...
    def chunk_at(self, path: str, line: int) -> ChunkAt | None: ...
    def chunk_spans(self, filters: Filters) -> list[tuple[str, int, int]]: ...
    def indexed_paths(self, filters: Filters) -> list[str]: ...
    def interrupt(self) -> None: ...  # from another thread: the running statement stops with QueryInterrupted


class WarmSource(Protocol):
    """What a warm reader (store/warm.py) reads to keep every chunk in memory and keep it current."""

    def meta(self) -> dict[str, str]: ...
    def change_token(self) -> object: ...  # another value whenever the index may have changed
    def read_snapshot(self) -> AbstractContextManager[None]: ...  # the reads inside see one state
    def file_chunk_ranges(self) -> dict[int, tuple[object, ...]]: ...  # file id → path, hash, kind, language, chunk id range, chunks
    def rows_of_files(self, file_ids: Sequence[int] | None) -> Iterator[tuple[int, ChunkRow]]: ...  # None: every file


class GraphReader(Protocol):
    """What graph questions read: symbols and the edges between them."""

    def symbols_named(self, name: str) -> list[SymbolRow]: ...
    def symbols_qualified(self, qualified: str) -> list[SymbolRow]: ...
    def symbols_at(self, path: str, line: int) -> list[SymbolRow]: ...
    def symbols_by_id(self, ids: Sequence[int]) -> dict[int, SymbolRow]: ...
    def outline(self, path: str) -> list[SymbolRow]: ...
    def symbol_search(self, query: TermQuery, limit: int) -> list[SymbolRow]: ...
    def edges_to(self, symbol_ids: Sequence[int], kinds: Sequence[str]) -> list[EdgeHit]: ...
    def unresolved_edges_named(self, name: str, kinds: Sequence[str]) -> list[EdgeHit]: ...
    def edges_from(self, symbol_id: int, kinds: Sequence[str]) -> list[EdgeHit]: ...
    def edge_sources(self, target_ids: Sequence[int], kinds: Sequence[str]) -> list[EdgeSource]: ...
    def resolved_edges(self) -> list[tuple[EdgeSite, int | None, str]]: ...  # every edge: site, target, resolution
    def graph_stats(self) -> dict[str, object]: ...


class Store(IndexWriter, SearchReader, WarmSource, GraphReader, Protocol):
    """A whole store, as Index opens it: every role, and its lifecycle."""

    keywords_bm25: bool  # its keyword scores are FTS5's bm25 (see WarmStore)

    def close(self) -> None: ...
    def rebuilding(self) -> AbstractContextManager[Store]: ...  # an empty store that replaces this one's content on success
    def vector_count(self) -> int: ...
    def repositories(self, named: Sequence[str] | None = None) -> list[str]: ...  # named: which of those exist
    def stats(self) -> StoreStats: ...


@runtime_checkable
class VectorSource(Protocol):
    """A store whose vectors a warm reader can hold and search itself (the SQLite file: its
    vec0 table is searched by brute force, 35 ms a query on Django's 47k vectors)."""

    def vectors_after(self, after_id: int, limit: int) -> tuple[np.ndarray, np.ndarray]: ...  # in id order
    def quantized_after(self, after_id: int, limit: int) -> tuple[np.ndarray, QuantizedVectors] | None: ...
    def vector_count_after(self, after_id: int) -> int: ...
    def vector_ids(self) -> np.ndarray: ...
    def chunks_of_vectors(self, ids: Sequence[int]) -> list[tuple[int, int]]: ...


class WarmStore(SearchReader, WarmSource, Protocol):
    """What a warm reader wraps."""

    keywords_bm25: bool  # its keyword scores are FTS5's bm25, which a warm reader can compute from memory


@dataclass(frozen=True)
class ReplicaLag:
    """How far the server that answers reads is behind the primary (None on the primary itself)."""

    server: str  # host:port
    bytes_behind: int  # WAL the primary has reported and this server has not replayed
    seconds_since_replay: float | None  # since it last applied a transaction

    @property
    def lagging(self) -> bool:
        return self.bytes_behind > 0

    def line(self) -> str:
        if not self.lagging:
            return f"answered by replica {self.server}, caught up with the primary"
        since = "" if self.seconds_since_replay is None else f", last change applied {self.seconds_since_replay:.1f} s ago"
        return f"answered by replica {self.server}, {self.bytes_behind:,} bytes of WAL behind the primary{since}"


@runtime_checkable
class RoutesRepositories(Protocol):
    """A store of many repositories that can name the few a question's words point to (the team
    index): a search across every repository reads only those."""

    def route(self, words: Sequence[str], limit: int) -> Route | None: ...


class RoutedOut(TypedDict):
    searched: list[str]  # the repositories a search across a team index read, best first
    of: int  # of how many


class Route(NamedTuple):
    """The repositories a search across all of them reads: `names`, best first, of `among`."""

    names: tuple[str, ...]
    among: int

    def out(self) -> RoutedOut:
        return {"searched": list(self.names), "of": self.among}

    def line(self) -> str:
        shown = ", ".join(self.names[:5]) + (f" and {len(self.names) - 5} more" if len(self.names) > 5 else "")
        return f"searched the {len(self.names)} of {self.among:,} repositories whose files hold the question's words best ({shown})"


@runtime_checkable
class ReplicaReads(Protocol):
    """A store whose reads may come from a replica of the server it writes to (the team index)."""

    def replica_lag(self) -> ReplicaLag | None: ...

    def primary_generation(self) -> tuple[int | None, int | None]: ...
