"""Before the first index of a folder: refuse what was surely not meant, ask before what is big.

`codewhere search "parse headers"` run from `/usr` used to start indexing 65,554 files. A folder
that is the home folder, `/`, a system folder or the cache dir is refused unless a PATH named it;
outside a git repository, a folder past GUARD_FILES files or GUARD_BYTES bytes (as the scanner
counts them, ignore rules applied) is asked about on a terminal and refused off one. A folder
already indexed is never asked about again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from codewhere import gitinfo
from codewhere.errors import QueryError
from codewhere.scan import ScanOptions, scan
from codewhere.types import FileRecord

GUARD_FILES = 20_000
GUARD_BYTES = 500 * 1024 * 1024
SYSTEM_FOLDERS = frozenset(Path(p) for p in ("/", "/usr", "/usr/local", "/usr/lib", "/usr/share", "/opt", "/var",
                                             "/etc", "/bin", "/lib", "/sbin", "/tmp", "/proc", "/sys", "/dev",
                                             "/System", "/Library", "/Applications", "/Users", "/home"))
PROCEED_HINT = "pass --yes, or set index.confirm_large = false in the config file"


def unmeant(root: Path, cache_dir: Path) -> str | None:
    """Why indexing `root` unasked is surely a mistake, or None."""
    root = root.resolve()
    if root == Path.home().resolve():
        return "your home folder"
    if root in SYSTEM_FOLDERS:
        return "a system folder"
    cache = cache_dir.expanduser().resolve()
    if root == cache or root.is_relative_to(cache):
        return "codewhere's own cache dir"
    return None


def size_past_guard(root: Path, options: ScanOptions) -> tuple[int, int] | None:
    """(files, bytes) counted until either passes its guard, or None when the folder stays under."""
    files = size = 0
    for found in scan(root, options):
        if isinstance(found, FileRecord):
            files += 1
            size += found.size
            if files > GUARD_FILES or size > GUARD_BYTES:
                return files, size
    return None


def check_first_index(root: Path, named: bool, cache_dir: Path, options: ScanOptions,
                      ask: Callable[[str], bool] | None) -> None:
    """Raise a QueryError for a first index that was not meant. `named`: a PATH named the folder;
    `ask`: asks a person yes or no (None off a terminal, where the answer is no)."""
    why = unmeant(root, cache_dir)
    if why is not None and not named:
        raise QueryError(f"not indexing {root}: it is {why} and no PATH named it",
                         f"run from inside a repository, or name the folder (`codewhere index {root}`)")
    if gitinfo.repository_root(root) is not None:
        return  # a repository's size is what its owner made it
    past = size_past_guard(root, options)
    if past is None:
        return
    files, size = past
    question = (f"{root} is not a git repository and holds over {files - 1:,} files ({size / 2**20:,.0f} MB so far); "
                "index it all?")
    if ask is not None and ask(question):
        return
    raise QueryError(f"not indexing {root}: it is not a git repository and holds over {min(files, GUARD_FILES):,} files "
                     f"or {GUARD_BYTES >> 20:,} MB", PROCEED_HINT)


def ask_on_terminal(question: str) -> bool:
    """A yes/no question on the terminal (stderr, then stdin)."""
    try:
        with open(os.ctermid(), "r+", encoding="utf-8") as tty:
            tty.write(f"codewhere: {question} [y/N] ")
            tty.flush()
            return tty.readline().strip().lower() in ("y", "yes")
    except OSError:
        return False
