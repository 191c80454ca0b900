"""Read a regular file under a root, and nothing else, whatever the tree does meanwhile.

Checking a path and then opening it leaves a window: a file swapped for a symbolic link (to
`/etc/passwd`, say) between the two is read through the link. Here each component of the path is
opened relative to the folder opened before it, none of them followed if it is a link, and the
file is checked after it is opened (a regular file, by the descriptor): what is read is what was
checked. A named pipe or a device is refused without blocking (opened non-blocking), so no entry of
a tree can hang the reader.

The scanner never follows links either, so every indexed file is reachable this way.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_HAS_DIR_FD = os.open in os.supports_dir_fd


class NotRegularFile(OSError):
    """The path names a link, a pipe, a device or a folder: never read."""


def read_bytes(root: Path | str, rel: str, limit: int | None = None) -> bytes:
    """The bytes of `rel` (`/`-separated, relative to `root`), never through a symbolic link
    below the root and never from anything but a regular file. `limit` refuses a bigger file
    (errno EFBIG) before reading it. Raises OSError (NotRegularFile for a link, pipe, device)."""
    parts = [part for part in rel.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        raise NotRegularFile(errno.EINVAL, f"not a file under the root: {rel!r}")
    if not _HAS_DIR_FD:  # no openat (Windows): the path as given, checked after opening
        return _read_checked(os.open(os.path.join(os.fspath(root), *parts), os.O_RDONLY | _NONBLOCK | _NOFOLLOW), rel, limit)
    folder = os.open(os.fspath(root), os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                below = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=folder)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotRegularFile(exc.errno, f"{rel}: {part} is not a folder (a link?)") from exc
                raise
            os.close(folder)
            folder = below
        try:
            fd = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise NotRegularFile(exc.errno, f"{rel} is a symbolic link") from exc
            raise
    finally:
        os.close(folder)
    return _read_checked(fd, rel, limit)


def _read_checked(fd: int, rel: str, limit: int | None) -> bytes:
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(errno.EINVAL, f"{rel} is not a regular file")
        if limit is not None and info.st_size > limit:
            raise OSError(errno.EFBIG, f"{rel} is larger than {limit} bytes")
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read() if limit is None else file.read(limit)
    finally:
        os.close(fd)


def read_text(root: Path | str, rel: str, limit: int | None = None) -> str:
    """`read_bytes` decoded as the indexer decodes: UTF-8, invalid bytes replaced."""
    return read_bytes(root, rel, limit).decode("utf-8", errors="replace")


def read_path(path: Path | str, limit: int | None = None) -> bytes:
    """A file the tool reads for itself (an ignore file, a config file), links followed: only a
    regular file, so a named pipe in its place cannot block the reader."""
    return _read_checked(os.open(os.fspath(path), os.O_RDONLY | _NONBLOCK | _CLOEXEC), os.fspath(path), limit)
