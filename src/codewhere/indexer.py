"""scan → read → chunk → store, touching only what changed since the last run."""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from codewhere.chunk import chunk_source, chunker_version
from codewhere.embed import Embedder
from codewhere.embed.base import TruncatingEmbedder
from codewhere.graph import refresh_resolution
from codewhere.parse import ParseResult, parse
from codewhere.scan import ScanOptions, read_source, scan
from codewhere.store import FileState, IndexWriter
from codewhere.tokens import index_tokens, symbol_fts_row
from codewhere.types import Chunk, FileRecord, Skip, SkipReason

log = logging.getLogger(__name__)
# Each step of a run, named, at INFO: the crash benchmark (benchmarks/crash_bench.py) kills an
# indexer right after one of them, so every phase is hit, not only the first second of a run.
phases = logging.getLogger("codewhere.phase")
PHASE_FILES = 50  # a "chunk" phase line every this many files read

BATCH_FILES = 200  # files per transaction: small enough to lose little when killed
BATCH_CHUNKS = 2_000
# meta key: the model whose vectors every chunk has; emptied in the transaction that writes chunks
VECTORS_COMPLETE = "vectors_complete"
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
    vectors_written: int = 0
    texts_truncated: int = 0  # embedded texts longer than the model reads (transformer models)
    truncated_at: int | None = None  # that limit, in tokens
    bytes_read: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    ignored_by: Counter[str] = field(default_factory=Counter)  # ignore-file pattern → paths it excluded
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.files_added or self.files_changed or self.files_removed)


def _fts_row(chunk: Chunk) -> tuple[str, str]:
    return index_tokens(chunk.path), index_tokens(chunk.text)


class _FileWrite(NamedTuple):
    """A file read and chunked, to be written with its chunks, symbols and edges."""

    record: FileRecord
    digest: str
    chunks: list[Chunk]
    parsed: ParseResult | None


class _SkipWrite(NamedTuple):
    """A file recorded as skipped, with the reason found when reading it."""

    record: FileRecord
    reason: SkipReason


class _Batch:
    """Collects file writes and commits them together."""

    def __init__(self, store: IndexWriter) -> None:
        self.store = store
        self.writes: list[_FileWrite | _SkipWrite] = []
        self.stat_updates: list[FileRecord] = []
        self.chunk_count = 0

    def full(self) -> bool:
        return len(self.writes) + len(self.stat_updates) >= BATCH_FILES or self.chunk_count >= BATCH_CHUNKS

    def flush(self, deletes: list[str] | None = None) -> None:
        if not (self.writes or self.stat_updates or deletes):
            return  # an unchanged refresh takes no write lock and writes nothing
        phases.info("write")
        with self.store.transaction():
            for write in self.writes:
                if isinstance(write, _SkipWrite):
                    self.store.record_skipped_file(write.record, write.reason)
                    continue
                record, digest, chunks, parsed = write
                symbols = parsed.symbols if parsed else ()
                self.store.replace_file(
                    record, digest, chunks, [_fts_row(c) for c in chunks], symbols,
                    [symbol_fts_row(s.name, s.qualified_name) for s in symbols], parsed.edges if parsed else (),
                )
            for record in self.stat_updates:
                self.store.update_file_stat(record.path, record.size, record.mtime_ns)
            if deletes:
                self.store.delete_files(deletes)
            if self.writes or deletes:
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
) -> IndexReport:
    """Bring the index of `root` up to date, vectors too when an embedder is given.

    The caller holds the writer lock and has checked that `embedder` is the index's model.
    """
    started = time.perf_counter()
    phases.info("scan")
    report = IndexReport()
    version = chunker_version(chunker)
    before = store.meta()  # read once; only this run writes meta from here on (the caller holds the lock)
    if before.get("chunker_version") != version:
        with store.transaction():
            store.clear_files()
            store.set_meta({"chunker_version": version, "chunker": chunker})
    known = store.file_states()
    scan_key = f"minified={options.include_minified}"
    if before.get("scan_options") != scan_key:
        # content rules changed: every file is read again (an unchanged hash is not re-chunked)
        known = {path: FileState(state.size, -1, state.hash, None) for path, state in known.items() if not state.skip_reason}
        with store.transaction():
            store.set_meta({"scan_options": scan_key})
    seen: set[str] = set()
    batch = _Batch(store)
    records: list[FileRecord] = []  # the scan first, so the file pass has a total to show
    for item in scan(root, options):
        if isinstance(item, Skip):
            report.skipped[item.reason.value] += 1
            if item.detail:
                report.ignored_by[item.detail] += 1
            continue
        records.append(item)
        if progress and len(records) % SCAN_STEP == 0:
            progress(Step("scan", len(records), None, item.path))
    for n, item in enumerate(records, start=1):
        seen.add(item.path)
        if progress:
            progress(Step("files", n, len(records), item.path))
        _visit(root, item, known.get(item.path), batch, report, chunker, options)
        if batch.full():
            batch.flush()
    removed = [path for path in known if path not in seen]
    report.files_removed = len(removed)
    batch.flush(removed)
    meta = store.meta()
    if report.changed or meta.get("root") != str(root) or meta.get(EDGES_RESOLVED) != "1":
        phases.info("edges")
        if progress:
            progress(Step("edges", 0, None))
        refresh_resolution(store)
        with store.transaction():
            store.set_meta({"root": str(root), "last_change": str(time.time()), EDGES_RESOLVED: "1"})
    # Looking for chunks without a vector reads every chunk (50 ms on Django): skipped when nothing
    # was written since a run that left every chunk with a vector of this model. Here the key is
    # never that model's id (a change emptied it), so it is written after the vectors.
    if embedder is not None and (report.changed or meta.get(VECTORS_COMPLETE) != embedder.info.id):
        truncating = embedder if isinstance(embedder, TruncatingEmbedder) else None
        truncated_before = truncating.documents_truncated if truncating else 0
        report.vectors_written = fill_vectors(store, embedder, progress)
        if truncating is not None:
            report.texts_truncated = truncating.documents_truncated - truncated_before
            report.truncated_at = truncating.max_seq_length
        with store.transaction():
            store.set_meta({VECTORS_COMPLETE: embedder.info.id})
    report.seconds = time.perf_counter() - started
    return report


VECTOR_BATCH = 256


def fill_vectors(store: IndexWriter, embedder: Embedder, progress: Progress | None = None) -> int:
    """Embed every distinct chunk text that has no vector yet; a page at a time, each committed.

    Runs after the file pass, so it also finishes the work of a killed run and of an index first
    built in keyword mode. Then drops the vectors no chunk uses any more: this run's edits and
    deletions make them, and so does a run killed before it dropped its own. Returns how many
    texts were embedded.
    """
    done, chunks, last_id = 0, 0, 0
    total = store.count_chunks_without_vectors() if progress else None
    while page := store.chunks_without_vectors(VECTOR_BATCH, last_id):
        last_id = page[-1][0]
        distinct = list({h: text for _, h, text in page}.items())  # identical chunks share one vector
        vectors = embedder.embed_documents([text for _, text in distinct])
        phases.info("vectors")
        with store.transaction():
            store.add_vectors([h for h, _ in distinct], vectors)
        done += len(distinct)
        chunks += len(page)
        if progress:
            progress(Step("vectors", chunks, max(total or 0, chunks)))
    with store.transaction():
        store.delete_orphan_vectors()
    return done


def _visit(
    root: Path, record: FileRecord, known: FileState | None, batch: _Batch, report: IndexReport, chunker: str,
    options: ScanOptions,
) -> None:
    if known and known.size == record.size and known.mtime_ns == record.mtime_ns:
        if known.skip_reason:
            report.skipped[known.skip_reason] += 1
        else:
            report.files_kept += 1
            report.files_unchanged += 1
        return
    source = read_source(root / record.path, options.include_minified)
    if isinstance(source, SkipReason):
        report.skipped[source.value] += 1
        batch.writes.append(_SkipWrite(record, source))
        return
    data, text = source
    if report.bytes_read == 0 or (report.files_added + report.files_changed) % PHASE_FILES == 0:
        phases.info("chunk")
    report.bytes_read += len(data)
    report.files_kept += 1
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    if known and known.hash == digest:
        report.files_unchanged += 1
        batch.stat_updates.append(record)
        return
    parsed = parse(record.language, text)
    chunks = chunk_source(record, text, parsed.symbols if parsed else None, chunker)
    if known and known.hash is not None:
        report.files_changed += 1
    else:
        report.files_added += 1
    report.chunks_written += len(chunks)
    batch.writes.append(_FileWrite(record, digest, chunks, parsed))
    batch.chunk_count += len(chunks)
