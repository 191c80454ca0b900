"""The quality tier filled in the background of a long-lived server (`mcp`, `serve`, `watch`).

One thread per served folder, at the lowest CPU priority, with an index of its own (its own
connection, as the watcher's): it waits until the static index is complete, then embeds what the
tier lacks a page at a time, taking the writer lock only when no refresh holds it. It then looks
again every CHECK_SECONDS, so edits are covered too. Searches use the tier once it covers every
text (tier.py); until then, and while it catches up after an edit, the static vectors answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from codewhere import tier
from codewhere.api import Index
from codewhere.errors import CodewhereError, IndexBusyError

log = logging.getLogger(__name__)

CHECK_SECONDS = 5.0  # between looks at an index that is not complete, busy, or fully covered
FILL_THREADS = 1  # onnxruntime threads of a background fill


class TierFiller:
    def __init__(self, root: Path, open_index: Callable[[], Index]) -> None:
        self.root = root
        self._open = open_index
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.coverage: tier.Coverage | None = None  # as of the last page written
        self.failed: str | None = None  # why the tier cannot be filled here (said once)

    def start(self) -> TierFiller:
        self._thread = threading.Thread(target=self._run, name=f"codewhere-tier {self.root.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        tier.lower_priority()  # before onnxruntime starts its threads: they inherit it
        try:
            index = self._open()
        except CodewhereError as exc:
            self._give_up(exc)
            return
        ready = False
        try:
            while not self._stop.is_set():
                ready = ready or "root" in index.store.meta()  # the static index's first build has finished
                if ready:
                    try:
                        # one core: the other stays with the searches and refreshes; nothing read while it is whole
                        filled = index.fill_tier(self._stop, self._progress, wait_seconds=0.0, threads=FILL_THREADS)
                        self.coverage = filled or self.coverage or index.tier_coverage()
                    except IndexBusyError:
                        pass  # a refresh holds the index: the next look continues where this page stopped
                    except CodewhereError as exc:  # no onnxruntime, no MiniLM package, a team index
                        self._give_up(exc)
                        return
                self._stop.wait(CHECK_SECONDS)
        finally:
            index.close()

    def _progress(self, done: int, total: int) -> None:
        self.coverage = tier.Coverage(done, total)

    def _give_up(self, exc: CodewhereError) -> None:
        self.failed = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        log.warning("the quality tier of %s is not filled: %s", self.root, self.failed)
