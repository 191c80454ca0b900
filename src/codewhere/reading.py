"""Read, hash, parse, chunk and tokenize files: in this process, or in worker processes on the
machine's other cores while this one writes the index.

What a file becomes depends on its bytes alone, so the work is a pure function of (root, path,
the hash the index has for it, the chunker, the content rules) and can run anywhere. Results come
back in the order the files went in: chunk ids, and so every tie in a ranking, are the same with
one worker or many.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from codewhere import collector
from codewhere.chunk import chunk_source, text_offsets
from codewhere.embed import Embedder
from codewhere.embed.static import StaticEmbedder
from codewhere.parse import ParseBudgetExceeded, ParseResult, parse
from codewhere.scan import file_digest, read_source
from codewhere.tokens import index_tokens, symbol_fts_row
from codewhere.types import Chunk, FileRecord, SkipReason

log = logging.getLogger(__name__)

# Below this many bytes to read, worker processes cost more to start (about 0.5 s each: Python,
# tree-sitter and the grammars) than they save: measured break-even at 3-5 MB of source on 2 cores
# (nvm 3 MB: 0.6 s in this process, 0.96 s with two workers; zod 3 MB: 2.3 s, 2.2 s).
POOL_MIN_BYTES = 6_000_000
FILES_PER_TASK = 16  # files sent to a worker at once: fewer round trips, still an even spread
TASKS_IN_FLIGHT = 4  # per worker: enough queued to keep it busy, few enough to bound memory


class Unreadable(NamedTuple):
    """The file cannot be indexed (binary, unreadable, minified): the reason, recorded."""

    reason: SkipReason


class SameContent(NamedTuple):
    """The file's bytes hash to what the index has: only its size and mtime are new."""

    size: int


class Chunked(NamedTuple):
    """The file read and cut into chunks, with what the keyword indexes hold for them."""

    size: int
    digest: str
    chunks: list[Chunk]
    parsed: ParseResult | None
    fts_rows: list[tuple[str, str]]  # each chunk's (path tokens, body tokens)
    symbol_fts_rows: list[tuple[str, str, str]]  # each symbol's (name, split name, qualified name tokens)
    # when the workers embed: the vector of each chunk to embed (`chunk.embed`), in order; their
    # embedding texts are then left empty, since nothing needs them again (a new model is a rebuild)
    vectors: np.ndarray | None = None
    text_at: list[int] | None = None  # where each chunk's text starts in the file's (-1: not a slice of it)


Outcome = Unreadable | SameContent | Chunked


class Job(NamedTuple):
    record: FileRecord
    known_hash: str | None  # the content hash the index has for the path, if any


def read_file(root: Path, job: Job, chunker: str, include_minified: bool, embedder: StaticEmbedder | None = None) -> Outcome:
    source = read_source(root, job.record.path, include_minified)
    if isinstance(source, SkipReason):
        return Unreadable(source)
    data, text = source
    digest = file_digest(data)
    if job.known_hash == digest:
        return SameContent(len(data))
    try:
        parsed = parse(job.record.language, text)
    except ParseBudgetExceeded:
        return Unreadable(SkipReason.TOO_COMPLEX)
    chunks = chunk_source(job.record, text, parsed.symbols if parsed else None, chunker)
    path_tokens = index_tokens(job.record.path)  # every chunk's path is the file's
    fts_rows = [(path_tokens, index_tokens(c.text)) for c in chunks]
    symbol_rows = [symbol_fts_row(s.name, s.qualified_name) for s in parsed.symbols] if parsed else []
    vectors = None
    # only a file new to the index: most texts of a changed file have their vector already (its
    # unchanged definitions), and the vector pass after the file pass embeds just the missing ones
    if embedder is not None and job.known_hash is None:
        texts = [c.embed_text for c in chunks if c.embed]
        vectors = embedder.embed_documents(texts) if texts else np.empty((0, embedder.info.dim), np.float32)
        chunks = [replace(c, embed_text="") if c.embed else c for c in chunks]
    return Chunked(len(data), digest, chunks, parsed, fts_rows, symbol_rows, vectors, text_offsets(text, chunks))


_worker_embedder: StaticEmbedder | None = None  # a worker's copy of the static model, when workers embed


def _read_task(root: Path, jobs: list[Job], chunker: str, include_minified: bool) -> list[Outcome]:
    return [read_file(root, job, chunker, include_minified, _worker_embedder) for job in jobs]


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def read_files(
    root: Path, jobs: Sequence[Job], chunker: str, include_minified: bool, workers: int | None = None,
    embedder: Embedder | None = None,
) -> Iterator[tuple[Job, Outcome]]:
    """Each job with its outcome, in the order given. With more than one worker and enough
    files, worker processes do the reading while the caller consumes; a pool that breaks (a
    worker killed, out of memory) is said once and the rest is read in this process.

    A static `embedder` (a token table: cheap to copy, as fast as the cache of shared vectors)
    is handed to the workers, which then embed the chunks of each file new to the index too
    (`Chunked.vectors`), on every core. In this process, for the files the index had, and for
    other models, vectors are made after the file pass."""
    workers = default_workers() if workers is None else max(1, workers)
    if workers == 1 or sum(job.record.size for job in jobs) < POOL_MIN_BYTES:
        for job in jobs:
            yield job, read_file(root, job, chunker, include_minified)
        return
    tasks = [list(jobs[i:i + FILES_PER_TASK]) for i in range(0, len(jobs), FILES_PER_TASK)]
    done = 0  # tasks whose outcomes were handed out
    worker_embedder = embedder if isinstance(embedder, StaticEmbedder) else None
    # the model goes to the workers through a file: a worker that dies as it starts then breaks
    # the pool instead of leaving this process blocked on a pipe nobody reads
    model_file = _model_file(worker_embedder) if worker_embedder is not None else None
    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_start,
        initargs=(os.getpid(), model_file),
    )
    try:
        pending: deque[Future[list[Outcome]]] = deque()
        queued = iter(tasks)
        for task in _take(queued, workers * TASKS_IN_FLIGHT):
            pending.append(pool.submit(_read_task, root, task, chunker, include_minified))
        while pending:
            outcomes = pending.popleft().result()
            for task in _take(queued, 1):
                pending.append(pool.submit(_read_task, root, task, chunker, include_minified))
            yield from zip(tasks[done], outcomes, strict=True)
            done += 1
        pool.shutdown(wait=True)
    except BrokenProcessPool as exc:
        log.warning("the file readers stopped (%s); reading the remaining files in this process%s", exc, _script_hint())
        for task in tasks[done:]:
            for job in task:
                yield job, read_file(root, job, chunker, include_minified, worker_embedder)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        if model_file is not None:
            model_file.unlink(missing_ok=True)


def _script_hint() -> str:
    """Run as `python script.py`, each worker imports the script again before its first task: a
    script that indexes at import (no main guard) starts the index again there, and the worker dies."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if script is None or getattr(main, "__spec__", None) is not None:  # `python -m`, `-c`, a REPL: nothing imported again
        return ""
    try:
        if "__main__" in Path(script).read_text(encoding="utf-8", errors="replace"):
            return ""  # guarded: the pool broke for another reason
    except OSError:
        return ""
    return f" (if {Path(script).name} indexes when imported, put that under `if __name__ == \"__main__\":`)"


MODEL_FILE_PREFIX = "codewhere-model-"


def _model_file(embedder: StaticEmbedder) -> Path:
    """The model pickled for the workers, named after this process: an indexer killed before it
    could delete its file (SIGKILL, out of memory) leaves one behind, which the next pool removes."""
    folder = Path(tempfile.gettempdir())
    remove_orphan_model_files(folder)
    prefix = f"{MODEL_FILE_PREFIX}{os.getpid()}-"
    with tempfile.NamedTemporaryFile(prefix=prefix, suffix=".pickle", dir=folder, delete=False) as file:
        pickle.dump(embedder, file, protocol=pickle.HIGHEST_PROTOCOL)
    return Path(file.name)


def remove_orphan_model_files(folder: Path) -> int:
    """Delete the worker model files of indexers that no longer run; returns how many."""
    removed = 0
    for path in folder.glob(f"{MODEL_FILE_PREFIX}*-*.pickle"):
        owner = path.name[len(MODEL_FILE_PREFIX):].split("-", 1)[0]
        if not owner.isdigit() or _process_alive(int(owner)):
            continue
        try:
            path.unlink()
            removed += 1
        except OSError:  # another user's file, or removed meanwhile: not ours to insist on
            continue
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


def _take(items: Iterator[list[Job]], n: int) -> Iterable[list[Job]]:
    for _ in range(n):
        item = next(items, None)
        if item is None:
            return
        yield item


def _worker_start(parent: int, model_file: Path | None) -> None:
    """Ctrl-C is the parent's to handle; a worker whose parent died (killed indexer) exits
    instead of waiting on its queue forever."""
    global _worker_embedder
    collector.rarely_from_now()
    if model_file is not None:
        with model_file.open("rb") as file:
            _worker_embedder = pickle.load(file)  # noqa: S301 — written by the parent a moment ago, mode 0600
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="codewhere-parent-watch", daemon=True).start()
