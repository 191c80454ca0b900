"""The folders a long-lived server answers about (the MCP server, the web page): their open
indexes, one question at a time, and the rule that every path stays inside a served folder."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TypeVar

from codewhere.api import Index
from codewhere.config import Settings
from codewhere.errors import CodewhereError, QueryError, ServerBusyError
from codewhere.indexer import Progress
from codewhere.tier_filler import TierFiller
from codewhere.watch import STOPPED, UNAVAILABLE, WATCHING, Watcher

T = TypeVar("T")

QUERY_SECONDS = 30.0  # a question (not the refresh before it) running longer is stopped
BUSY_SECONDS = 60.0  # a call waits this long for the one before it, then says the server is busy
SETTLE_SECONDS = 2.0  # a one-file question waits this long for a running refresh to let go of the index
FIRST_ANSWER_SECONDS = 2.0  # a question during a first index waits this long, then answers from what is committed


class Workspace:
    """The served roots, their open indexes, and the path rules. One call at a time uses the
    indexes (an apsw connection is not shared by threads at once): the rest wait their turn."""

    def __init__(self, roots: list[Path], redact_secrets: bool = True, index_file: str | None = None) -> None:
        self.roots = [r.resolve() for r in roots]
        self.redact_secrets = redact_secrets
        self._indexes: dict[Path, Index] = {}
        self._index_file = index_file
        self._turn = threading.Lock()
        self._watchers: dict[Path, Watcher] = {}
        self._fillers: dict[Path, TierFiller] = {}

    def watch(self, poll: bool = False) -> None:
        """Keep every root's index current from file-system events, in threads beside the
        answers: a question then walks no tree and waits for no refresh (store/warm.py picks up
        each commit). A root that cannot be watched is checked before each answer, as without."""
        for root in self.roots:
            if root not in self._watchers:
                self._watchers[root] = Watcher(root, partial(self._writer, root), poll=poll).start()
            if root not in self._fillers and Settings.load(root).quality:  # the quality tier, behind the watch
                self._fillers[root] = TierFiller(root, partial(self._writer, root)).start()

    def _writer(self, root: Path) -> Index:
        """The watcher's own index of `root`: its own connection, its writes beside the readers'."""
        return Index.open(root, self._index_file if len(self.roots) == 1 else None)

    def watch_state(self, root: Path) -> str | None:
        """The watcher of `root` in words, or None when there is none."""
        watcher = self._watchers.get(root)
        return None if watcher is None else watcher.status.describe()

    def freshness(self, root: Path | None = None) -> str | None:
        """What the watcher of `root` is doing, when an answer should say it (a refresh running,
        the watch unavailable); None when the index is simply current."""
        watcher = self._watchers.get(root or self.roots[0])
        if watcher is None or watcher.status.state == WATCHING:
            return None
        return watcher.status.describe()

    def index_for(self, path: str | None = None, progress: Progress | None = None) -> tuple[Index, str | None]:
        """The index whose root holds `path` (refreshed), and `path` relative to that root."""
        if path is None or path in ("", "."):
            root, rel = self.roots[0], None
        else:
            root, rel = self.confine(path)
        index = self.open(root, progress)
        if rel and root in self._watchers and self._watchers[root].live():
            self._settle(index, rel)
        return index, rel

    @staticmethod
    def _settle(index: Index, rel: str) -> None:
        """A question about one file sees it as it is on disk, even in the moment between a save
        and the watcher's refresh (an agent reads the lines it has just written): a file whose
        size or time differs from the index is refreshed first, alone."""
        try:
            info = os.stat(index.root / rel)
        except OSError:
            info = None
        if info is not None and not stat.S_ISREG(info.st_mode):
            return
        known = index.store.file_states(under=[rel]).get(rel)
        current = None if info is None else (info.st_size, info.st_mtime_ns)
        if (None if known is None else (known.size, known.mtime_ns)) != current:
            try:
                index.refresh(paths=[rel], wait_seconds=SETTLE_SECONDS)
            except CodewhereError:
                pass  # the watcher is mid-refresh and will have it: answer from the last commit

    def open(self, root: Path, progress: Progress | None = None) -> Index:
        """The index of one served root, opened once and refreshed before each use."""
        if root not in self._indexes:
            self._indexes[root] = Index.open(root, self._index_file if len(self.roots) == 1 else None, warm=True)
        index = self._indexes[root]
        if index.shared:  # a team index is kept fresh by its indexers, not by readers
            return index
        watcher = self._watchers.get(root)
        if watcher is None or watcher.status.state in (UNAVAILABLE, STOPPED):
            return self._checked(index, progress)  # no watch: look at every file before answering
        if not watcher.live() and "root" not in index.store.meta():
            # the first index is being built in the background: a moment for a small tree to finish,
            # then the answer comes from what it has committed so far (`freshness` says how far)
            watcher.wait_ready(progress, timeout=FIRST_ANSWER_SECONDS)
            if watcher.status.state in (UNAVAILABLE, STOPPED):
                return self._checked(index, progress)  # no watch after all: look at every file
        return index  # current, or catching up: the last commit answers (`freshness` says which)

    @staticmethod
    def _checked(index: Index, progress: Progress | None) -> Index:
        index.refresh_if_free(progress, vectors=True)
        return index

    def confine(self, path: str) -> tuple[Path, str]:
        """Resolve `path` (relative to the first root, or absolute) and refuse anything outside the roots."""
        if "\0" in path:
            raise QueryError("the path holds a NUL byte", "pass the path as text, without \\0")
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.roots[0] / candidate
        resolved = candidate.resolve()
        for root in self.roots:
            if resolved == root or resolved.is_relative_to(root):
                return root, resolved.relative_to(root).as_posix() if resolved != root else ""
        raise CodewhereError(f"{path} is outside the served folders", "give a path inside " + ", ".join(map(str, self.roots)))

    def call(self, work: Callable[[Progress | None], T], progress: Progress | None = None) -> T:
        """Run one question's work when no other call is using the indexes (the work bounds its
        own question with `deadline`). Waits up to BUSY_SECONDS for its turn."""
        if not self._turn.acquire(timeout=BUSY_SECONDS):
            raise ServerBusyError(f"codewhere is still busy with an earlier call after {BUSY_SECONDS:.0f} s", "retry in a moment")
        try:
            return work(progress)
        finally:
            self._turn.release()

    @contextmanager
    def deadline(self, index: Index, seconds: float = QUERY_SECONDS) -> Iterator[None]:
        """Interrupt `index`'s running statement if the block takes longer than `seconds`."""
        timer = threading.Timer(seconds, index.store.interrupt)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def interrupt(self) -> None:
        """A call was cancelled: stop whatever statement it is running, so it lets go of its turn."""
        for index in list(self._indexes.values()):
            index.store.interrupt()

    def tier_state(self, root: Path) -> str | None:
        """The background fill of `root`'s quality tier in words, or None when there is none."""
        filler = self._fillers.get(root)
        if filler is None:
            return None
        if filler.failed:
            return f"quality tier: not filled ({filler.failed})"
        return filler.coverage.line() if filler.coverage else "quality tier: waiting for the index to be complete"

    def tier_line(self, index: Index) -> str | None:
        """The tier of `index` for a status answer: its background fill, else its coverage."""
        return self.tier_state(index.root) or index.tier_line()

    def close(self) -> None:
        for filler in self._fillers.values():
            filler.stop()
        self._fillers.clear()
        for watcher in self._watchers.values():
            watcher.stop()
        self._watchers.clear()
        for index in self._indexes.values():
            index.close()
        self._indexes.clear()
