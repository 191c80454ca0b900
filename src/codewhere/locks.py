"""Advisory file locks across processes: one index writer, one default-model build."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from codewhere.errors import IndexBusyError, IndexNotWritableError


class FileLock:
    def __init__(self, path: Path, wait_seconds: float, what: str) -> None:
        self.path = path
        self.wait_seconds = wait_seconds
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Wait up to `wait_seconds`; False if another process still holds the lock."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise IndexNotWritableError(
                f"cannot create the lock file {self.path} ({exc.strerror})",
                "make its folder writable, or pass --index FILE in a folder you can write",
            ) from exc
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

    def __enter__(self) -> FileLock:
        if not self.acquire():
            raise IndexBusyError(
                f"another codewhere process holds {self.what}",
                "wait for it to finish, or pass --wait SECONDS to wait longer",
            )
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def index_writer_lock(index_path: Path, wait_seconds: float) -> FileLock:
    return FileLock(index_path.with_name(index_path.name + ".lock"), wait_seconds, f"the index {index_path} (indexing)")
