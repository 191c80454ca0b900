"""What changed since the last walk, found without walking: a search's quick check.

A walk lists every folder and decides every path by the ignore rules (1.5 s on the Linux kernel's
78,000 files before any rule). The quick check instead stats what the last walk saw: each folder
(adding, removing or renaming an entry changes its mtime), each indexed file (an edit changes its
size or mtime), and each ignore file (a rule change means a whole walk). The folders and files
that differ are refreshed as a file watcher's paths are (`scan_paths`). What it cannot see — a
file too large to index that shrank in place, a symlink pointed elsewhere — a whole
walk (`codewhere index`) still finds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # scan imports this module, and the store package imports scan's options
    from codewhere.store.base import FileStamp

META_KEY = "tree_stamps"  # index meta: the stamps of the last walk, as JSON


@dataclass
class TreeStamps:
    """The mtime of each folder a walk listed ("" is the root) and of each ignore file it read."""

    folders: dict[str, int] = field(default_factory=dict)
    rules: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"folders": self.folders, "rules": self.rules}, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_meta(cls, meta: dict[str, str]) -> TreeStamps | None:
        raw = meta.get(META_KEY)
        if not raw:
            return None
        try:
            data = json.loads(raw)
            return cls(dict(data["folders"]), dict(data["rules"]))
        except (ValueError, KeyError, TypeError):
            return None

    def merged(self, walked: TreeStamps, refreshed: list[str]) -> TreeStamps:
        """These stamps after a refresh of the paths `refreshed`, whose walk found `walked`: what
        was under a refreshed folder is replaced by what the walk saw there now."""
        def kept(stamps: dict[str, int]) -> dict[str, int]:
            return {path: mtime for path, mtime in stamps.items() if not any(_under(path, top) for top in refreshed)}

        return TreeStamps({**kept(self.folders), **walked.folders}, {**kept(self.rules), **walked.rules})


def _under(path: str, top: str) -> bool:
    return top == "" or path == top or path.startswith(top + "/")


def _mtime(path: str) -> int | None:
    try:
        return os.lstat(path).st_mtime_ns
    except OSError:
        return None


def changed_paths(root: Path, stamps: TreeStamps, known: Sequence[FileStamp]) -> list[str] | None:
    """The folders and files to refresh (an empty list: nothing changed), or None when only a
    whole walk will do (an ignore file changed, appeared or went away)."""
    base = str(root)
    for rel, mtime in stamps.rules.items():
        if _mtime(os.path.join(base, rel)) != mtime:
            return None
    changed = [rel for rel, mtime in stamps.folders.items() if _mtime(os.path.join(base, rel) if rel else base) != mtime]
    if "" in changed:
        return None  # the root's own listing changed: a walk of the root is a whole walk
    root_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:  # paths relative to the open root: no join per file
        for rel, size, mtime_ns, _ in known:
            try:
                info = os.stat(rel, dir_fd=root_fd, follow_symlinks=False)
            except OSError:
                changed.append(rel)
                continue
            if info.st_size != size or info.st_mtime_ns != mtime_ns:
                changed.append(rel)
    finally:
        os.close(root_fd)
    return sorted(set(changed))
