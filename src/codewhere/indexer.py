"""scan → read → chunk → store, touching only what changed since the last run."""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from codewhere import collector
from codewhere.chunk import chunker_version
from codewhere.embed import Embedder
from codewhere.embed.base import TruncatingEmbedder
from codewhere.freshness import META_KEY as STAMPS_KEY
from codewhere.freshness import TreeStamps, changed_paths
from codewhere.graph import carried_over, refresh_resolution
from codewhere.parse import ParseResult
from codewhere.reading import Job, Outcome, SameContent, Unreadable, read_files
from codewhere.scan import IGNORE_FILES, ScanOptions, scan, scan_paths
from codewhere.store import FileStamp, FileState, IndexWriter
from codewhere.store.shared_vectors import SharedVectors
from codewhere.types import Chunk, FileRecord, Skip, SkipReason

log = logging.getLogger(__name__)
# Each step of a run, named, at INFO: the crash benchmark (benchmarks/crash_bench.py) kills an
# indexer right after one of them, so every phase is hit, not only the first second of a run.
phases = logging.getLogger("codewhere.phase")
PHASE_FILES = 50  # a "chunk" phase line every this many files read

BATCH_FILES = 200  # files per transaction: small enough to lose little when killed
# a run that changed at most this many files re-resolves only the edges it can have moved and
# looks for orphaned vectors only among the texts it replaced
INCREMENTAL_FILES = 2_000
BATCH_CHUNKS = 2_000
# meta key: the model whose vectors every chunk has; emptied in the transaction that writes chunks
VECTORS_COMPLETE = "vectors_complete"
# A run without the model (a keyword search) that changed few files leaves VECTORS_COMPLETE as
# it was and records here the first chunk it wrote: only chunks from there on lack a vector, so
# the next run with the model embeds those instead of looking through every chunk.
VECTORS_PENDING = "vectors_pending_from"
# meta key: "1" once every edge is resolved against the files as committed; emptied likewise, so
# a run killed between its last write and the resolution has it done by the next
EDGES_RESOLVED = "edges_resolved"

SCAN_STEP = 500  # a "scan" step every this many files found


@dataclass(frozen=True)
class Step:
    """Where a run stands, for a progress display: `scan` (files found so far; no total yet),
    `files` (read, or found unchanged, of the files the scan kept), `edges` (resolving calls),
    `vectors` (chunks embedded of those that had no vector). `detail` is the current path."""

    phase: str
    done: int
    total: int | None = None
    detail: str = ""


Progress = Callable[[Step], None]


@dataclass
class IndexReport:
    files_kept: int = 0
    files_added: int = 0
    files_changed: int = 0
    files_removed: int = 0
    files_unchanged: int = 0
    chunks_written: int = 0
    vectors_written: int = 0  # texts the model embedded
    vectors_reused: int = 0  # texts whose vector another index on this machine had made (store/shared_vectors.py)
    texts_truncated: int = 0  # embedded texts longer than the model reads (transformer models)
    truncated_at: int | None = None  # that limit, in tokens
    bytes_read: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    ignored_by: Counter[str] = field(default_factory=Counter)  # ignore-file pattern → paths it excluded
    seconds: float = 0.0
    precise: list[str] = field(default_factory=list)  # what the precise passes (SCIP, jedi) did, one line each
    precise_problems: list[str] = field(default_factory=list)  # SCIP documents left out, and why
    began: dict[str, float] = field(default_factory=dict, repr=False, compare=False)  # phase → perf_counter() when it began

    def begin(self, phase: str) -> None:
        """Note that `phase` began (once a run; the file pass's marker repeats every PHASE_FILES files)."""
        self.began.setdefault(phase, time.perf_counter())

    @property
    def phase_seconds(self) -> dict[str, float]:
        """Each phase the run went through (scan, files, edges, vectors), in order, with its seconds
        from its start to the next one's: together the run's `seconds`."""
        starts = sorted(self.began.items(), key=lambda item: item[1])
        ends = [at for _, at in starts[1:]] + ([starts[0][1] + self.seconds] if starts else [])
        return {phase: round(end - at, 4) for (phase, at), end in zip(starts, ends, strict=True)}

    @property
    def changed(self) -> bool:
        return bool(self.files_added or self.files_changed or self.files_removed)


class _FileWrite(NamedTuple):
    """A file read and chunked, to be written with its chunks, symbols and edges."""

    record: FileRecord
    digest: str
    chunks: list[Chunk]
    parsed: ParseResult | None
    fts_rows: list[tuple[str, str]]
    symbol_fts_rows: list[tuple[str, str, str]]
    vectors: np.ndarray | None  # made by the workers: one per chunk to embed, in order
    text_at: list[int] | None  # where each chunk's text starts in the file's text (-1: not a slice of it)


class _SkipWrite(NamedTuple):
    """A file recorded as skipped, with the reason found when reading it."""

    record: FileRecord
    reason: SkipReason


class _Batch:
    """Collects file writes and commits them together."""

    def __init__(self, store: IndexWriter, text_only: bool) -> None:
        self.store = store
        self.text_only = text_only  # no model this run: its chunks get no vector
        self.writes: list[_FileWrite | _SkipWrite] = []
        self.stat_updates: list[FileRecord] = []
        self.chunk_count = 0
        # what this run changed, for the work after the file pass: the paths written or deleted
        # and the names whose candidates they changed (edge resolution), and the first
        # chunk id written (vectors: every chunk before it had one when the run began)
        self.touched_paths: list[str] = []
        self.touched_names: set[str] = set()
        self.old_hashes: set[str] = set()  # texts of the chunks replaced: only their vectors can be orphaned
        self.first_chunk_id: int | None = None

    def small(self) -> bool:
        """Few enough files changed for the follow-up work to look only at what they touched."""
        return len(self.touched_paths) <= INCREMENTAL_FILES

    def full(self) -> bool:
        return len(self.writes) + len(self.stat_updates) >= BATCH_FILES or self.chunk_count >= BATCH_CHUNKS

    def flush(self, deletes: list[str] | None = None) -> None:
        if not (self.writes or self.stat_updates or deletes):
            return  # an unchanged refresh takes no write lock and writes nothing
        phases.info("write")
        with self.store.transaction():
            changed = [w.record.path for w in self.writes] + list(deletes or ())
            small = self.small()
            replaced: set[str] = set()
            if small:
                old_symbols = self.store.symbols_in(changed)
                replaced = self.store.content_hashes_in(changed)
                self.old_hashes |= replaced
            first_written: int | None = None
            self.touched_paths += changed
            self.store.forget_contents([w.record.path for w in self.writes])
            for write in self.writes:
                if isinstance(write, _SkipWrite):
                    self.store.record_skipped_file(write.record, write.reason)
                    continue
                record, digest, chunks, parsed, fts_rows, symbol_fts_rows, vectors, text_at = write
                ids = self.store.replace_file(
                    record, digest, chunks, fts_rows, parsed.symbols if parsed else (), symbol_fts_rows,
                    parsed.edges if parsed else (), text_at,
                )
                if vectors is not None and len(vectors):  # a text another file has keeps its one vector
                    self.store.add_vectors([c.content_hash for c in chunks if c.embed], vectors)
                if ids:
                    self.first_chunk_id = min(ids[0], self.first_chunk_id or ids[0])
                    first_written = min(ids[0], first_written or ids[0])
            for record in self.stat_updates:
                self.store.update_file_stat(record.path, record.size, record.mtime_ns)
            if deletes:
                self.store.delete_files(deletes)
            if small:  # edges into symbols that only got a new id follow it; the rest are resolved again
                names, moves = carried_over(old_symbols, self.store.symbols_in(changed))
                self.touched_names |= names
                self.store.move_edge_targets(moves)
            if (self.writes or deletes) and self.text_only and small:
                self.store.delete_orphan_vectors(sorted(replaced))
                pending = [int(p) for p in (self.store.meta().get(VECTORS_PENDING), first_written) if p]
                self.store.set_meta({VECTORS_PENDING: str(min(pending)) if pending else "", EDGES_RESOLVED: ""})
            elif self.writes or deletes:
                self.store.set_meta({VECTORS_COMPLETE: "", EDGES_RESOLVED: ""})
        phases.info("committed")
        self.writes, self.stat_updates, self.chunk_count = [], [], 0


def refresh(
    root: Path,
    store: IndexWriter,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    chunker: str = "symbols",
    options: ScanOptions = ScanOptions(),
    paths: Sequence[str] | None = None,
    shared: SharedVectors | None = None,
    workers: int | None = None,
    quick: bool = False,
) -> IndexReport:
    """Bring the index of `root` up to date, vectors too when an embedder is given.

    `paths` (relative to the root; files or folders) limits the run to what a file watcher saw
    change: no walk of the rest of the tree, and the whole change (files, vectors, edges)
    commits as one transaction, so readers see the index before it or after it, never half.
    A changed ignore file, or a chunker or scan option change, makes it a whole refresh.
    `workers` processes read and chunk the files (default: one per core; see reading.py).
    `quick` (a search's refresh) stats what the last walk saw instead of walking (freshness.py)
    and refreshes only the folders and files that differ.

    The caller holds the writer lock and has checked that `embedder` is the index's model.
    """
    with collector.rarely():
        return _refresh(root, store, progress, embedder, chunker, options, paths, shared, workers, quick)


def _refresh(
    root: Path, store: IndexWriter, progress: Progress | None, embedder: Embedder | None, chunker: str,
    options: ScanOptions, paths: Sequence[str] | None, shared: SharedVectors | None, workers: int | None, quick: bool,
) -> IndexReport:
    started = time.perf_counter()
    phases.info("scan")
    report = IndexReport()
    report.begin("scan")
    version = chunker_version(chunker)
    before = store.meta()  # read once; only this run writes meta from here on (the caller holds the lock)
    scan_key = _scan_key(options)
    found: list[str] | None = None
    model_id = embedder.info.id if embedder is not None else None
    check = quick_check(root, store, model_id, chunker, options, before) if quick and paths is None else None
    if check is not None:
        known = check.known
        found = changed_paths(root, check.stamps, known)
        if found == [] and not check.pending:
            _count_unchanged(report, known)
            report.seconds = time.perf_counter() - started
            return report
        paths = found
    if paths is not None and (before.get("chunker_version") != version or before.get("scan_options") != scan_key
                              or any(_changes_rules(path) for path in paths)):
        paths = None
    if quick and paths is not None and found is not None:
        # the quick check vouches for every file outside what it found: they count as unchanged
        vouched = set(found)
        _count_unchanged(report, [stamp for stamp in known if not _under(stamp[0], vouched)])
    if paths is not None:
        with store.transaction():
            _file_pass(root, store, report, progress, chunker, options, before, embedder, paths, shared, workers)
    else:
        _file_pass(root, store, report, progress, chunker, options, before, embedder, None, shared, workers)
    store.expect_files(0)  # nothing more comes: what the store held for a move it may drop
    report.seconds = time.perf_counter() - started
    return report


@dataclass(frozen=True)
class QuickCheck:
    """What a quick check reads from the index before it stats the tree (freshness.py)."""

    stamps: TreeStamps
    known: list[FileStamp]
    pending: bool  # vectors left to make: a refresh has work even when no file changed


def quick_check(
    root: Path, store: IndexWriter, model_id: str | None, chunker: str, options: ScanOptions,
    meta: dict[str, str] | None = None,
) -> QuickCheck | None:
    """None when a refresh must do more than refresh what changed (other rules or model, no
    walk recorded). `model_id`: the embedding model whose vectors must be complete (None: text only)."""
    before = store.meta() if meta is None else meta
    stamps = TreeStamps.from_meta(before)
    if stamps is None or not _settled(root, before, chunker_version(chunker), _scan_key(options), model_id):
        return None
    return QuickCheck(stamps, store.file_stamps(), bool(model_id is not None and before.get(VECTORS_PENDING)))


def _settled(root: Path, before: dict[str, str], version: str, scan_key: str, model_id: str | None) -> bool:
    """The last run finished its work under the same rules: only changed files can need any."""
    return (before.get("chunker_version") == version and before.get("scan_options") == scan_key
            and before.get("root") == str(root) and before.get(EDGES_RESOLVED) == "1"
            and (model_id is None or before.get(VECTORS_COMPLETE) == model_id))


def _count_unchanged(report: IndexReport, known: Sequence[FileStamp]) -> None:
    for _, _, _, skip_reason in known:
        if skip_reason:
            report.skipped[skip_reason] += 1
        else:
            report.files_kept += 1
            report.files_unchanged += 1


def _under(path: str, found: set[str]) -> bool:
    """The path is one of `found`, or lies in a folder of it."""
    parts = path.split("/")
    return any("/".join(parts[:n]) in found for n in range(1, len(parts) + 1))


def _scan_key(options: ScanOptions) -> str:
    """The content rules a file pass read the files by: another key means every file is read again."""
    return f"minified={options.include_minified}"


def _changes_rules(path: str) -> bool:
    """A change to this path can change what the scan keeps elsewhere."""
    return path.rpartition("/")[2] in IGNORE_FILES or path.strip("/") in ("", ".git/info/exclude", ".git/info")


def _file_pass(
    root: Path, store: IndexWriter, report: IndexReport, progress: Progress | None, chunker: str,
    options: ScanOptions, before: dict[str, str], embedder: Embedder | None, paths: Sequence[str] | None,
    shared: SharedVectors | None, workers: int | None,
) -> None:
    version = chunker_version(chunker)
    if before.get("chunker_version") != version:
        with store.transaction():
            store.clear_files()
            store.set_meta({"chunker_version": version, "chunker": chunker})
    known = store.file_states(None if paths is None else sorted(set(paths)))
    scan_key = _scan_key(options)
    if before.get("scan_options") != scan_key:
        # content rules changed: every file is read again (an unchanged hash is not re-chunked)
        known = {path: FileState(state.size, -1, state.hash, None) for path, state in known.items() if not state.skip_reason}
        with store.transaction():
            store.set_meta({"scan_options": scan_key})
    seen: set[str] = set()
    batch = _Batch(store, text_only=embedder is None)
    records: list[FileRecord] = []  # the scan first, so the file pass has a total to show
    walked = TreeStamps()
    for item in scan(root, options, walked) if paths is None else scan_paths(root, paths, options, walked):
        if isinstance(item, Skip):
            report.skipped[item.reason.value] += 1
            if item.detail:
                report.ignored_by[item.detail] += 1
            continue
        records.append(item)
        if progress and len(records) % SCAN_STEP == 0:
            progress(Step("scan", len(records), None, item.path))
    jobs: list[Job] = []
    for item in records:
        seen.add(item.path)
        state = known.get(item.path)
        if state and state.size == item.size and state.mtime_ns == item.mtime_ns:
            if state.skip_reason:
                report.skipped[state.skip_reason] += 1
            else:
                report.files_kept += 1
                report.files_unchanged += 1
            continue
        jobs.append(Job(item, state.hash if state else None))
    unchanged = len(records) - len(jobs)
    store.expect_files(sum(job.record.size for job in jobs))
    if progress and jobs and unchanged:
        progress(Step("files", unchanged, len(records)))
    outcomes = read_files(root, jobs, chunker, options.include_minified, workers, embedder)
    for n, (job, outcome) in enumerate(outcomes, start=1):
        if progress:
            progress(Step("files", unchanged + n, len(records), job.record.path))
        _apply(job, outcome, batch, report)
        if batch.full():
            batch.flush()
    removed = [path for path in known if path not in seen]
    report.files_removed = len(removed)
    batch.flush(removed)
    _record_stamps(store, before, walked, paths)
    meta = store.meta()
    if report.changed or meta.get("root") != str(root) or meta.get(EDGES_RESOLVED) != "1":
        phases.info("edges")
        report.begin("edges")
        if progress:
            progress(Step("edges", 0, None))
        # only the edges this run can have moved, when every edge was resolved before it
        if before.get(EDGES_RESOLVED) == "1" and before.get("root") == str(root) and batch.small():
            refresh_resolution(store, batch.touched_names, batch.touched_paths)
        else:
            refresh_resolution(store)
        with store.transaction():
            store.set_meta({"root": str(root), "last_change": str(time.time()), EDGES_RESOLVED: "1"})
    # Looking for chunks without a vector reads every chunk (50 ms on Django): skipped when nothing
    # was written since a run that left every chunk with a vector of this model. Here the key is
    # never that model's id (a change emptied it), so it is written after the vectors.
    pending = int(meta.get(VECTORS_PENDING) or 0) or None
    if embedder is not None and (report.changed or pending or meta.get(VECTORS_COMPLETE) != embedder.info.id):
        truncating = embedder if isinstance(embedder, TruncatingEmbedder) else None
        truncated_before = truncating.documents_truncated if truncating else 0
        # every chunk had a vector and none was orphaned as the run began (the key is written
        # after both): only the chunks this run wrote can lack one, only the texts it replaced
        # can be orphaned
        after: int | None = 0
        orphans: set[str] | None = None
        if before.get(VECTORS_COMPLETE) == embedder.info.id and batch.small():
            starts = [first for first in (batch.first_chunk_id, pending) if first is not None]
            after = min(starts) - 1 if starts else None
            orphans = batch.old_hashes
        if after is not None:
            report.begin("vectors")
            written, report.vectors_reused = fill_vectors(store, embedder, progress, after, orphans, shared)
            report.vectors_written += written
        else:
            with store.transaction():
                store.delete_orphan_vectors(sorted(orphans or ()))
        if truncating is not None:
            report.texts_truncated = truncating.documents_truncated - truncated_before
            report.truncated_at = truncating.max_seq_length
        with store.transaction():
            store.set_meta({VECTORS_COMPLETE: embedder.info.id, VECTORS_PENDING: ""})


def _record_stamps(store: IndexWriter, before: dict[str, str], walked: TreeStamps, paths: Sequence[str] | None) -> None:
    """The folder and ignore-file stamps for the next quick check: those of this walk, over the
    last ones where this run walked only some paths (and none before: the next whole walk)."""
    if paths is None:
        stamps: TreeStamps | None = walked
    else:
        last = TreeStamps.from_meta(before)
        stamps = last.merged(walked, list(paths)) if last is not None else None
    if stamps is not None and (text := stamps.to_json()) != before.get(STAMPS_KEY):
        with store.transaction():
            store.set_meta({STAMPS_KEY: text})


VECTOR_BATCH = 256


def fill_vectors(
    store: IndexWriter, embedder: Embedder, progress: Progress | None = None, after_id: int = 0,
    orphans_among: set[str] | None = None, shared: SharedVectors | None = None,
) -> tuple[int, int]:
    """Give every distinct chunk text without a vector one; a page at a time, each committed.
    Texts `shared` holds (another index on this machine embedded them) are not embedded again.

    Runs after the file pass, so it also finishes the work of a killed run and of an index first
    built in keyword mode. Then drops the vectors no chunk uses any more: this run's edits and
    deletions make them, and so does a run killed before it dropped its own. Returns how many
    texts were embedded, and how many taken from `shared`.
    """
    done, reused, chunks, last_id = 0, 0, 0, after_id
    total = store.count_chunks_without_vectors(after_id) if progress else None
    while page := store.chunks_without_vectors(VECTOR_BATCH, last_id):
        last_id = page[-1][0]
        distinct: dict[str, str] = {}
        for _, content_hash, text in page:  # identical chunks share one vector: that of the first (reading.py too)
            distinct.setdefault(content_hash, text)
        vectors, embedded = _vectors_for(list(distinct.values()), embedder, shared)
        phases.info("vectors")
        with store.transaction():
            store.add_vectors(list(distinct), vectors)
        done += embedded
        reused += len(distinct) - embedded
        chunks += len(page)
        if progress:
            progress(Step("vectors", chunks, max(total or 0, chunks)))
    with store.transaction():
        store.delete_orphan_vectors(None if orphans_among is None else sorted(orphans_among))
    return done, reused


def _vectors_for(texts: list[str], embedder: Embedder, shared: SharedVectors | None) -> tuple[np.ndarray, int]:
    """A vector for each text, from `shared` where another index made it, else from the model
    (and then into `shared`); and how many the model made."""
    if shared is None:
        return embedder.embed_documents(texts), len(texts)
    keys = [text_key(text) for text in texts]
    known = shared.get(keys)
    missing = [i for i, key in enumerate(keys) if key not in known]
    vectors = np.empty((len(texts), embedder.info.dim), np.float32)
    for i, key in enumerate(keys):
        if key in known:
            vectors[i] = known[key]
    if missing:
        fresh = embedder.embed_documents([texts[i] for i in missing])
        vectors[missing] = fresh
        shared.put([keys[i] for i in missing], fresh)
    return vectors, len(missing)


def text_key(text: str) -> str:
    """The shared vector cache's key of a text: what the model read, exactly."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _apply(job: Job, outcome: Outcome, batch: _Batch, report: IndexReport) -> None:
    """Count what reading a file found and queue its write."""
    record = job.record
    if isinstance(outcome, Unreadable):
        report.skipped[outcome.reason.value] += 1
        batch.writes.append(_SkipWrite(record, outcome.reason))
        return
    if report.bytes_read == 0 or (report.files_added + report.files_changed) % PHASE_FILES == 0:
        phases.info("chunk")
        report.begin("files")
    report.bytes_read += outcome.size
    report.files_kept += 1
    if isinstance(outcome, SameContent):
        report.files_unchanged += 1
        batch.stat_updates.append(record)
        return
    if job.known_hash is not None:
        report.files_changed += 1
    else:
        report.files_added += 1
    report.chunks_written += len(outcome.chunks)
    if outcome.vectors is not None:
        report.vectors_written += len(outcome.vectors)
    batch.writes.append(_FileWrite(record, outcome.digest, outcome.chunks, outcome.parsed, outcome.fts_rows,
                                   outcome.symbol_fts_rows, outcome.vectors, outcome.text_at))
    batch.chunk_count += len(outcome.chunks)
