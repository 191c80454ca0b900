"""Walk a root and decide, file by file, what gets indexed and why the rest does not."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

from codewhere.languages import (
    ASSET_EXTENSIONS,
    LOCKFILES,
    SKIPPED_DIRS,
    kind_of,
    language_of,
)
from codewhere.types import FileRecord, Skip, SkipReason

MAX_FILE_BYTES = 1_000_000
BINARY_PROBE_BYTES = 512
IGNORE_FILES = (".gitignore", ".codewhereignore")
_IGNORE_NAMES = frozenset(IGNORE_FILES)


@dataclass(frozen=True)
class _Rules:
    """Ignore specs of one folder, applied to paths relative to that folder."""

    base: str  # folder relative to the root, "" for the root
    spec: pathspec.GitIgnoreSpec


def _load_rules(folder: Path, base: str, extra: tuple[Path, ...] = ()) -> _Rules | None:
    lines: list[str] = []
    for path in (*extra, *(folder / name for name in IGNORE_FILES)):
        try:
            lines.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            continue
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
        return None
    return _Rules(base, pathspec.GitIgnoreSpec.from_lines(lines))


def _is_ignored(rules: list[_Rules], rel: str, is_dir: bool) -> bool:
    """gitignore semantics: the deepest folder's last matching pattern decides."""
    decision = False
    for rule in rules:
        sub = rel[len(rule.base) + 1 :] if rule.base else rel
        result = rule.spec.check_file(sub + "/" if is_dir else sub)
        if result.include is not None:
            decision = result.include
    return decision


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _classify_symlink(entry: os.DirEntry[str], root: str, parent_real: str) -> SkipReason:
    """Symlinks are never followed: the target is either outside the root or indexed under its own path."""
    try:
        os.stat(entry.path)
    except OSError as exc:
        return SkipReason.SYMLINK_LOOP if exc.errno == errno.ELOOP else SkipReason.BROKEN_SYMLINK
    target = os.path.realpath(entry.path)
    if not _within(target, root):
        return SkipReason.SYMLINK_OUTSIDE_ROOT
    if os.path.isdir(target) and _within(parent_real, target):
        return SkipReason.SYMLINK_LOOP
    return SkipReason.SYMLINK_DUPLICATE


def scan(root: Path, max_bytes: int = MAX_FILE_BYTES) -> Iterator[FileRecord | Skip]:
    """Yield every file under `root` as a FileRecord to index or a Skip with its reason.

    Decisions here use names and stat only; content checks (binary, unreadable) happen in
    `read_source`, so an unchanged file is never opened on refresh.
    """
    root_real = os.path.realpath(root)
    top = _load_rules(Path(root_real), "", (Path(root_real, ".git", "info", "exclude"),))
    # (folder, its path from the root, the rules of the folders above it)
    stack: list[tuple[str, str, list[_Rules]]] = [(root_real, "", [top] if top else [])]
    while stack:
        folder, rel_folder, rules = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            yield Skip(rel_folder + "/", SkipReason.UNREADABLE)
            continue
        # a folder's own ignore files are read only when its listing holds one: trying to open
        # both in every folder was a quarter of a refresh's scan on Django (3,233 folders)
        if rel_folder and not _IGNORE_NAMES.isdisjoint(e.name for e in entries):
            own = _load_rules(Path(folder), rel_folder)
            rules = [*rules, own] if own else rules
        subfolders: list[tuple[str, str, list[_Rules]]] = []
        for entry in entries:
            rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
            try:
                if entry.is_symlink():
                    yield Skip(rel, _classify_symlink(entry, root_real, folder))
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name in SKIPPED_DIRS:
                        yield Skip(rel + "/", SkipReason.BUILTIN_DIR)
                    elif _is_ignored(rules, rel, is_dir=True):
                        yield Skip(rel + "/", SkipReason.IGNORED)
                    else:
                        subfolders.append((entry.path, rel, rules))
                elif entry.is_file(follow_symlinks=False):
                    yield _check_file(entry, rel, rules, max_bytes)
                else:
                    yield Skip(rel, SkipReason.NOT_REGULAR)
            except OSError:
                yield Skip(rel, SkipReason.UNREADABLE)
        stack.extend(reversed(subfolders))


def _check_file(entry: os.DirEntry[str], rel: str, rules: list[_Rules], max_bytes: int) -> FileRecord | Skip:
    if entry.name in LOCKFILES:
        return Skip(rel, SkipReason.LOCKFILE)
    if _is_ignored(rules, rel, is_dir=False):
        return Skip(rel, SkipReason.IGNORED)
    if os.path.splitext(entry.name)[1].lower() in ASSET_EXTENSIONS:
        return Skip(rel, SkipReason.ASSET)
    stat = entry.stat(follow_symlinks=False)
    if stat.st_size > max_bytes:
        return Skip(rel, SkipReason.TOO_LARGE)
    language = language_of(rel)
    return FileRecord(rel, kind_of(rel, language), language, stat.st_size, stat.st_mtime_ns)


def read_source(path: Path) -> tuple[bytes, str] | SkipReason:
    """The file's bytes and text, or why it can't be indexed. Invalid UTF-8 is replaced, not fatal."""
    try:
        data = path.read_bytes()
    except OSError:
        return SkipReason.UNREADABLE
    if b"\0" in data[:BINARY_PROBE_BYTES]:
        return SkipReason.BINARY
    text = data.decode("utf-8", errors="replace")
    return data, text.removeprefix("\ufeff")
