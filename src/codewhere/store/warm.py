"""A search reader that keeps every chunk's row (with the names it defines, for name lookups),
its vectors and its keyword postings in memory, over either store.

A long-lived process (the MCP server, an eval, a benchmark, a Python program that searches many
times) asks for one with `Index.open(..., warm=True)`; a one-shot `codewhere search` never pays
the load. The rows are reread whenever the index changes (a write here or a commit by another
process: the store's change token moves), and then only for the files that changed. Call
targets are not kept: resolution moves them in unchanged files, rereading them all took 130 ms
on Django after every change, and a search asks for a few dozen chunks' (under 1 ms).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from codewhere.store.base import ChunkAt, VectorSource, WarmStore, nearest_chunks, spelled_keys
from codewhere.store.quantized import QUANTIZE_FROM, QuantizedVectors
from codewhere.store.term_postings import HeldTerms, PostingSource
from codewhere.store.warm_keywords import WarmKeywords
from codewhere.store.warm_keywords import build as build_keywords
from codewhere.types import ChunkRow, Filters, TermQuery

log = logging.getLogger(__name__)

# Chunks are kept up to this much chunk text and this many chunks (each costs about 600 bytes
# besides its text: laravel's 30k chunks take 25 MB); past either, a search reads its candidates'
# rows from the store, as a Linux-sized index must.
WARM_TEXT_LIMIT = 64 * 1024 * 1024
WARM_CHUNK_LIMIT = 200_000
# Vectors past this many are held quantized (quantized.py), as the SQLite index itself keeps them
# from there on (its compact form): no float32 copy of them exists to hold.
EXACT_VECTOR_LIMIT = QUANTIZE_FROM
VECTOR_PAGE = 50_000  # vectors read from the store at a time
CALLS_HELD = 100_000  # chunks whose call targets are kept between changes (then forgotten at once)


@dataclass
class WarmChunks:
    """Every chunk as search reads it, at one state of the index. `files` keeps what each file held when its chunks were read, so a change rereads
    only the files it touched."""

    chunker: str | None = None
    files: dict[int, tuple[object, ...]] = field(default_factory=dict)  # id → path, hash, kind, language, first and last chunk id
    chunk_ids: dict[int, list[int]] = field(default_factory=dict)  # file id → its chunks
    rows: dict[int, ChunkRow] = field(default_factory=dict)
    text_bytes: int = 0
    # compound name → (chunk id, name as written) of each chunk defining it, in no order; a list
    # is copied before this instance first changes it (`_owned`), since the last state shares it
    definers: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    _owned: set[str] = field(default_factory=set)

    def copy(self) -> WarmChunks:
        """A copy to update while searches in other threads read this one (lists are replaced, not changed)."""
        return WarmChunks(self.chunker, dict(self.files), dict(self.chunk_ids), dict(self.rows), self.text_bytes,
                          dict(self.definers))

    def forget_file(self, file_id: int) -> None:
        del self.files[file_id]
        gone: dict[str, set[int]] = {}  # each name's list filtered once, however many chunks defined it
        for cid in self.chunk_ids.pop(file_id):
            row = self.rows.pop(cid)
            self.text_bytes -= len(row.text)
            for name in row.defines:
                gone.setdefault(name, set()).add(cid)
        for name, ids in gone.items():
            kept = [pair for pair in self.definers.get(name, ()) if pair[0] not in ids]
            if kept:
                self.definers[name] = kept
                self._owned.add(name)  # a new list: this instance's own
            else:
                self.definers.pop(name, None)
                self._owned.discard(name)

    def forget_all(self) -> None:
        """Nothing held (a new chunker or a rebuild): cheaper than forgetting file by file."""
        self.files, self.chunk_ids, self.rows, self.text_bytes = {}, {}, {}, 0
        self.definers, self._owned = {}, set()

    def add(self, file_id: int, row: ChunkRow) -> None:
        self.rows[row.chunk_id] = row
        self.chunk_ids.setdefault(file_id, []).append(row.chunk_id)
        self.text_bytes += len(row.text)
        for name, spelled in zip(row.defines, row.spelled, strict=True):
            self._definers_of(name).append((row.chunk_id, spelled))

    def _definers_of(self, name: str) -> list[tuple[int, str]]:
        if name not in self._owned:
            self.definers[name] = list(self.definers.get(name, ()))
            self._owned.add(name)
        return self.definers[name]

    def defining(self, names: Sequence[str], spelled: Sequence[str], passes: Callable[[ChunkRow], bool]) -> dict[str, list[int]]:
        """As the store's `chunks_defining_names`: each name's defining chunks that `passes`, by id."""
        keys, as_written = set(spelled_keys(names, spelled)), set(spelled)
        out: dict[str, list[int]] = {}
        for name in dict.fromkeys(names):
            ids = {cid for cid, written in self.definers.get(name, ())
                   if (name not in keys or written in as_written) and passes(self.rows[cid])}
            if ids:
                out[name] = sorted(ids)
        return out

    def too_big(self) -> bool:
        return self.text_bytes > WARM_TEXT_LIMIT or len(self.rows) > WARM_CHUNK_LIMIT


class WarmVectors:
    """Every stored vector in one float32 matrix, searched with one matrix product instead of
    the store's scan (Django: 35 ms a query in SQLite). Answers as the store's KNN does: the
    `limit` nearest texts by cosine distance, then every chunk holding one, by distance and id.
    Past `EXACT_VECTOR_LIMIT` vectors they are held quantized (`QuantizedVectors`): the answer
    is then approximate (on the kernel, 0.95 of the exact top 100), at a quarter of the memory.
    A change appends the new vectors and masks those the index dropped; the matrix is rebuilt
    when a quarter of it is dead."""

    def __init__(self, made: tuple[str | None, str | None] = (None, None), quantized: bool = False) -> None:
        self.made = made  # the index's creation time and model: the ids mean these vectors only there
        self.ids = np.empty(0, np.int64)
        self.matrix = np.empty((0, 0), np.float32)
        self.norms = np.empty(0, np.float32)
        self.quantized: QuantizedVectors | None = QuantizedVectors.of(np.empty((0, 0), np.float32)) if quantized else None
        self.alive = np.empty(0, bool)

    def updated(self, store: VectorSource) -> WarmVectors:
        """A new holder with the store's current vectors: this one is never changed, since
        searches in other threads may be reading it. Vectors are read a page at a time, so
        quantized ones never stand in memory as float32 all at once."""
        last = int(self.ids.max()) if len(self.ids) else 0
        quantize = self.quantized is not None or len(self.ids) + store.vector_count_after(last) > EXACT_VECTOR_LIMIT
        base = self if quantize == (self.quantized is not None) else WarmVectors(self.made, quantize)
        last = int(base.ids.max()) if len(base.ids) else 0
        ids_read: list[np.ndarray] = [base.ids]
        pages: list[np.ndarray] = []
        parts: list[QuantizedVectors] = [base.quantized] if base.quantized is not None else []
        while True:
            stored = store.quantized_after(last, VECTOR_PAGE) if quantize else None
            if stored is not None:  # the index keeps them quantized: read as they are
                ids, part = stored
                if len(ids):
                    parts.append(part)
            else:
                ids, matrix = store.vectors_after(last, VECTOR_PAGE)
                if len(ids) and quantize:
                    parts.append(QuantizedVectors.of(matrix))
                elif len(ids):
                    pages.append(matrix)
            if not len(ids):
                break
            ids_read.append(ids)
            last = int(ids[-1])
        new = WarmVectors(self.made, quantize)
        new.ids = np.concatenate(ids_read)  # each part joined once: page by page would copy all of it each time
        if quantize:
            new.quantized = QuantizedVectors.joined(parts)
        elif pages:
            new.matrix = np.concatenate([base.matrix, *pages]) if len(base.matrix) else np.concatenate(pages)
            new.norms = np.concatenate([base.norms, *(np.linalg.norm(m, axis=1).astype(np.float32) for m in pages)])
        else:
            new.matrix, new.norms = base.matrix, base.norms
        new.alive = np.isin(new.ids, store.vector_ids())
        if len(new.ids) and new.alive.sum() < 0.75 * len(new.ids):
            new.ids = new.ids[new.alive]
            if new.quantized is not None:
                new.quantized = new.quantized.select(new.alive)
            else:
                new.matrix, new.norms = new.matrix[new.alive], new.norms[new.alive]
            new.alive = np.ones(len(new.ids), bool)
        return new

    def search(self, query: np.ndarray, limit: int, store: VectorSource) -> list[tuple[int, float]]:
        alive = int(self.alive.sum())
        if not alive or limit <= 0:
            return []
        q = np.asarray(query, np.float32)
        k = min(limit, alive)
        if self.quantized is not None:
            nearest, distances = self.quantized.nearest(q, k, self.alive)
            by_vector = dict(zip(self.ids[nearest].tolist(), np.asarray(distances).tolist(), strict=True))
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                similarity = (self.matrix @ q) / (self.norms * np.float32(np.linalg.norm(q)))
            distance = np.where(self.alive, np.float32(1.0) - similarity, np.float32(np.inf)).astype(np.float32)
            nearest = np.argpartition(distance, k - 1)[:k] if k < len(distance) else np.arange(len(distance))
            by_vector = dict(zip(self.ids[nearest].tolist(), distance[nearest].tolist(), strict=True))
        return nearest_chunks(by_vector, store.chunks_of_vectors(list(by_vector)), limit)


class WarmReader:
    """A SearchReader: chunk rows from memory, everything else from the store."""

    def __init__(self, store: WarmStore) -> None:
        self.store = store
        self.location, self.repo, self.shared = store.location, store.repo, store.shared
        self.refused = False  # too big to keep: every read goes to the store
        self._vector_source = isinstance(store, VectorSource)  # a protocol check costs 13 µs: once, not per search
        self._chunks: WarmChunks | None = None
        self._state: object = None
        self._held_vectors: WarmVectors | None = None
        self._vectors_state: object = None
        self._held_keywords: tuple[WarmChunks, WarmKeywords] | None = None
        self._building: WarmChunks | None = None  # the chunks whose postings a thread is building
        self.keywords_built = threading.Event()  # set after each build (tests wait on it)
        self._held_terms: HeldTerms | None = None  # past the limits: the asked terms' postings
        self._calls: dict[int, list[tuple[int, str]]] = {}  # call_target_chunks, at `_calls_state`
        self._calls_state: object = None
        self._lock = threading.Lock()

    # ---- served from memory --------------------------------------------------------------

    def chunk_rows(self, ids: Sequence[int], filters: Filters) -> dict[int, ChunkRow]:
        warm = self._for(filters) if ids else None
        if warm is None:
            return self.store.chunk_rows(ids, filters)
        excluded, repos = filters.exclude_kinds, filters.repos if self.shared else ()
        return {cid: row for cid in ids if (row := warm.rows.get(cid)) is not None
                and row.kind not in excluded and (not repos or row.repo in repos)}

    # ---- read from the store -------------------------------------------------------------

    def call_target_chunks(self, chunk_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
        """From the store, kept until the index next changes (a change anywhere can resolve a
        call again): the same test chunks are candidates of query after query (nvm: 0.1 ms each)."""
        state = self.store.change_token()
        with self._lock:
            if state != self._calls_state or len(self._calls) > CALLS_HELD:
                self._calls, self._calls_state = {}, state
            calls = self._calls
        missing = [cid for cid in chunk_ids if cid not in calls]
        found = self.store.call_target_chunks(missing) if missing else {}
        if missing:
            with self._lock:
                if self._calls is calls:  # not replaced by a change meanwhile
                    calls.update((cid, found.get(cid, [])) for cid in missing)
        return {cid: targets for cid in chunk_ids if (targets := found.get(cid) or calls.get(cid))}

    def keyword_search(self, query: TermQuery, limit: int, filters: Filters) -> list[tuple[int, float]]:
        keywords = self._keywords_for(query, filters)
        if keywords is not None:
            return keywords.search(query.terms, query.field_weights, limit)
        held = self._terms_for(query, filters)
        if held is not None and (found := held.search(query.terms, query.field_weights, limit)) is not None:
            return found
        return self.store.keyword_search(query, limit, filters)

    def file_keyword_search(self, query: TermQuery, limit: int, filters: Filters) -> dict[tuple[str, str], float]:
        keywords = self._keywords_for(query, filters)
        if keywords is not None:
            return keywords.file_search(query.terms, query.field_weights, limit)
        held = self._terms_for(query, filters)
        if held is not None and (files := held.file_search(query.terms, query.field_weights, limit)) is not None:
            return files
        return self.store.file_keyword_search(query, limit, filters)

    def _keywords_for(self, query: TermQuery, filters: Filters) -> WarmKeywords | None:
        """The postings, for an unfiltered any-term query (the rest is the store's)."""
        return self._keywords() if filters.is_empty() and query.match == "any" else None

    def _terms_for(self, query: TermQuery, filters: Filters) -> HeldTerms | None:
        """For an index too big to hold (`refused`), the postings of the terms asked so far, for
        an unfiltered any-term query on a store whose scores are FTS5's bm25."""
        if not (self.refused and filters.is_empty() and query.match == "any" and self.store.keywords_bm25):
            return None
        if self._held_terms is None and isinstance(self.store, PostingSource):
            self._held_terms = HeldTerms(self.store)
        return self._held_terms

    def vector_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[tuple[int, float]]:
        vectors = self._vectors() if filters.is_empty() and self._vector_source else None
        if vectors is None:
            return self.store.vector_search(query, limit, filters)
        return vectors.search(query, limit, self.store)  # type: ignore[arg-type]

    def chunks_defining_names(self, names: Sequence[str], filters: Filters, spelled: Sequence[str] = ()) -> dict[str, list[int]]:
        warm = self._for(filters) if names else None
        if warm is None:
            return self.store.chunks_defining_names(names, filters, spelled)
        excluded, repos = filters.exclude_kinds, filters.repos if self.shared else ()
        return warm.defining(names, spelled, lambda row: row.kind not in excluded and (not repos or row.repo in repos))

    def chunk_at(self, path: str, line: int) -> ChunkAt | None:
        return self.store.chunk_at(path, line)

    def chunk_spans(self, filters: Filters) -> list[tuple[str, int, int]]:
        return self.store.chunk_spans(filters)

    def indexed_paths(self, filters: Filters) -> list[str]:
        return self.store.indexed_paths(filters)

    def interrupt(self) -> None:
        self.store.interrupt()

    # ---- keeping the vectors -------------------------------------------------------------

    def _vectors(self) -> WarmVectors | None:
        """The vectors in memory, brought up to date if the index changed."""
        state = self.store.change_token()
        if state != self._vectors_state:
            with self._lock:
                if state != self._vectors_state:
                    meta = self.store.meta()
                    # a rebuild or another model starts the ids again: nothing held is kept
                    made = (meta.get("created_at"), meta.get("model_fingerprint"))
                    held = self._held_vectors
                    vectors = (held if held is not None and held.made == made else WarmVectors(made)).updated(
                        self.store)  # type: ignore[arg-type]
                    self._held_vectors, self._vectors_state = vectors, state
        return self._held_vectors

    # ---- keeping the keyword postings ----------------------------------------------------

    def _keywords(self) -> WarmKeywords | None:
        """The postings of the chunks as they are now, or None while they are being built (the
        store answers meanwhile: the same lists). Built in a thread, so a search never waits. None
        for a store whose keyword scores are not bm25 (PostgreSQL's ts_rank)."""
        chunks = self.chunks() if self.store.keywords_bm25 else None
        if chunks is None:
            return None
        held = self._held_keywords
        if held is not None and held[0] is chunks:
            return held[1]
        with self._lock:
            if self._building is not chunks:
                self._building = chunks
                threading.Thread(target=self._build_keywords, args=(chunks, held[1] if held else None),
                                 name="codewhere-keywords", daemon=True).start()
        return None

    def _build_keywords(self, chunks: WarmChunks, before: WarmKeywords | None) -> None:
        try:
            files = {fid: (held, [chunks.rows[c] for c in chunks.chunk_ids.get(fid, [])]) for fid, held in chunks.files.items()}
            keywords = build_keywords(files, before)
        except Exception:  # the store still answers: a failure here costs speed, not answers
            log.exception("could not hold the keyword postings of %s in memory", self.location)
            return
        with self._lock:
            if self._building is chunks:
                self._held_keywords, self._building = (chunks, keywords), None
        self.keywords_built.set()

    # ---- keeping the chunks --------------------------------------------------------------

    def _for(self, filters: Filters) -> WarmChunks | None:
        """The chunks in memory, unless a scope filters them (SQL's LIKE rule, kept in one place)
        or a one-folder index is asked for another repository (then nothing passes; SQL says so)."""
        if filters.scopes or (filters.repos and not self.shared and self.repo not in filters.repos):
            return None
        return self.chunks()

    def chunks(self) -> WarmChunks | None:
        """The chunks in memory, brought up to date if the index changed; None when too big to keep."""
        if self.refused:
            return None
        state = self.store.change_token()
        if state != self._state:
            with self._lock:  # MCP calls run in threads: one updates, the others wait for it
                if state != self._state:
                    warm = self._chunks.copy() if self._chunks else WarmChunks()
                    if not self._update(warm):
                        log.info("%s holds over %d MB of chunk text or %d chunks; searches read them per query",
                                 self.location, WARM_TEXT_LIMIT >> 20, WARM_CHUNK_LIMIT)
                        self.refused, self._chunks, self._state = True, None, None
                        return None
                    # the state was read before the update: a commit during it brings another
                    self._chunks, self._state = warm, state
        return self._chunks

    def _update(self, warm: WarmChunks) -> bool:
        """Reread the chunks of the files that changed since `warm` was read; False past the limits."""
        store = self.store
        with store.read_snapshot():
            meta = store.meta()
            # a new chunker re-chunks every file, a rebuild makes a new index: perhaps into the same ids
            chunker = f"{meta.get('chunker_version')}@{meta.get('created_at')}"
            if chunker != warm.chunker:
                warm.forget_all()
                warm.chunker = chunker
            files = store.file_chunk_ranges()
            if sum(cast(int, held[-1]) for held in files.values()) > WARM_CHUNK_LIMIT:
                return False  # past the limit on count alone: no row read (the kernel: 1.2 s, 160 MB)
            for file_id in [f for f, held in warm.files.items() if files.get(f) != held]:
                warm.forget_file(file_id)
            changed = [f for f in files if f not in warm.files]
            for file_id, row in store.rows_of_files(None if len(changed) == len(files) else changed):
                warm.add(file_id, row)
                if warm.too_big():
                    return False
            warm.files.update((f, files[f]) for f in changed)
        return True
