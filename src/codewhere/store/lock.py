"""One writer per index file, across processes: an advisory lock on a file beside the index."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from codewhere.errors import IndexBusyError


class WriterLock:
    def __init__(self, index_path: Path, wait_seconds: float) -> None:
        self.path = index_path.with_name(index_path.name + ".lock")
        self.wait_seconds = wait_seconds
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Wait up to `wait_seconds`; False if another process still holds the lock."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.wait_seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.05)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WriterLock:
        if not self.acquire():
            raise IndexBusyError(
                f"another codewhere process is indexing {self.path.with_suffix('')}",
                "wait for it to finish, or pass --wait SECONDS to wait longer",
            )
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.release()
