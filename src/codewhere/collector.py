"""How often Python's cycle collector runs while an index is built.

A build allocates millions of short-lived tuples, lists and rows and makes almost no reference
cycles, yet at CPython's default (a collection every 700 new container objects) the collector ran
150-360 times a build of a mid-sized repository and took 3-5 % of it (zod: 137 ms of 3.7 s).
Collecting every 20,000 cut its time to a fifth or less (BENCHMARKS.md §4, stop 49); what waits
for a collection is then up to 20,000 young objects instead of 700.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

BUILD_THRESHOLD = 20_000  # new container objects between two youngest-generation collections

_lock = threading.Lock()
_builds = 0  # builds running in this process (an MCP server refreshes several indexes)
_before: tuple[int, int, int] = gc.get_threshold()


def _raised() -> tuple[int, int, int]:
    """Collect at BUILD_THRESHOLD at the most often; returns the thresholds as they were."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], BUILD_THRESHOLD), *before[1:])
    return before


@contextmanager
def rarely() -> Iterator[None]:
    """The collector at BUILD_THRESHOLD for the duration, then as it was once no build runs."""
    global _builds, _before
    with _lock:
        if _builds == 0:
            _before = _raised()
        _builds += 1
    try:
        yield
    finally:
        with _lock:
            _builds -= 1
            if _builds == 0:
                gc.set_threshold(*_before)


def rarely_from_now() -> None:
    """For a worker process, which does nothing but build."""
    _raised()
