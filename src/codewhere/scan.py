"""Walk a root and decide, file by file, what gets indexed and why the rest does not."""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import logging
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from codewhere import confined
from codewhere.gitinfo import repository_root
from codewhere.languages import (
    ASSET_EXTENSIONS,
    LOCKFILES,
    MINIFIED_SUFFIXES,
    SKIPPED_DIRS,
    kind_of,
    language_of,
)
from codewhere.types import FileRecord, Skip, SkipReason

if TYPE_CHECKING:
    import pathspec

    from codewhere.freshness import TreeStamps

log = logging.getLogger(__name__)

RACY_NS = 2_000_000_000  # see _walk's stamps
MAX_FILE_BYTES = 1_000_000
BINARY_PROBE_BYTES = 512
# minified or generated: a file of at least this size whose lines average more than this
MINIFIED_MIN_BYTES = 4096
MINIFIED_MEAN_LINE = 300
GIT_IGNORE_FILE = ".gitignore"
# ripgrep's rule: .gitignore only inside a git repository; these apply everywhere
ALWAYS_IGNORE_FILES = (".ignore", ".codewhereignore")
IGNORE_FILES = (GIT_IGNORE_FILE, *ALWAYS_IGNORE_FILES)
_IGNORE_NAMES = frozenset(IGNORE_FILES)
GITIGNORE_MODES = ("auto", "always", "never")  # auto: inside a git repository only


@dataclass(frozen=True)
class ScanOptions:
    max_bytes: int = MAX_FILE_BYTES
    include_minified: bool = False
    gitignore: str = "auto"


@dataclass(frozen=True)
class _Rules:
    """Ignore specs of one folder, applied to paths relative to that folder; `origins` names the
    file and line of each pattern, for "nothing to index" messages."""

    base: str  # folder relative to the root, "" for the root
    spec: pathspec.GitIgnoreSpec
    origins: tuple[str, ...]
    any_pattern: re.Pattern[str] | None = None  # matches where some pattern of `spec` does


_ANY_FOLDER = "^(?:.+/)?"
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


def _any_pattern(spec: pathspec.GitIgnoreSpec) -> re.Pattern[str] | None:
    """One regular expression that matches (with `match`) exactly the paths some pattern of
    `spec` matches. pathspec tries every pattern against every path in Python (on the Linux
    kernel, 8 M calls and most of a freshness walk); a path no pattern matches, nearly every
    path, now costs one call, and only the rest goes through pathspec's exact last-match-wins
    logic. pathspec anchors every gitignore regex with `^`, most of them as `^(?:.+/)?` (a
    pattern that may match below any folder): that prefix is factored out so the engine tries
    each folder boundary once, not once per pattern. None when a pattern is not such a plain
    regular expression: pathspec then decides every path."""
    floating: list[str] = []
    anchored: list[str] = []
    for pattern in spec.patterns:
        if pattern.include is None:
            continue  # a blank or comment line: never matches
        regex = getattr(pattern, "regex", None)
        if not isinstance(regex, re.Pattern) or not isinstance(regex.pattern, str) or regex.flags & ~re.UNICODE:
            return None
        text = _NAMED_GROUP.sub("(?:", regex.pattern)
        if text.startswith(_ANY_FOLDER):
            floating.append(f"(?:{text[len(_ANY_FOLDER):]})")
        elif text.startswith("^"):
            anchored.append(f"(?:{text[1:]})")
        else:
            return None
    alternatives = ([f"{_ANY_FOLDER[1:]}(?:{'|'.join(floating)})"] if floating else []) + anchored
    if not alternatives:
        return None
    try:
        return re.compile(f"^(?:{'|'.join(alternatives)})")
    except re.error:
        return None


_warned: set[tuple[str, int]] = set()  # bad ignore lines already reported by this process


def _compiled(lines: list[str]) -> pathspec.GitIgnoreSpec | None:
    import pathspec  # 15 ms, only where a folder has ignore rules: a search that walks nothing skips it

    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except (ValueError, TypeError):  # GitIgnorePatternError is a ValueError
        return None


MAX_WILDCARDS = 16  # a pattern with more `*` and `?` than this is skipped: its regex could backtrack for minutes
_STAR_RUN = re.compile(r"(?<!\\)\*{2,}")


def _bounded(line: str, path: Path, number: int) -> str | None:
    """`line` with each run of stars as git reads it (a run between slashes or at the ends of
    the pattern matches any folders, `**`; any other run is one `*`), so `'*' * 200 + 'z'` is
    `*z`; None, with a warning once, when it still holds more than MAX_WILDCARDS wildcards.
    pathspec compiles each `*` to `[^/]*`, and a long run of them backtracks exponentially on a
    path that does not match, where git answers at once."""
    def one_run(match: re.Match[str]) -> str:
        start, end = match.span()
        at_boundary = (start == 0 or line[start - 1] == "/") and (end == len(line) or line[end] == "/")
        return "**" if at_boundary else "*"

    kept = _STAR_RUN.sub(one_run, line)
    if kept.count("*") + kept.count("?") - kept.count("\\*") - kept.count("\\?") > MAX_WILDCARDS:
        if (str(path), number) not in _warned:
            _warned.add((str(path), number))
            log.warning("%s line %d has more than %d wildcards; skipped it (it could take minutes to match)",
                        path, number, MAX_WILDCARDS)
        return None
    return kept


def _load_rules(folder: Path, base: str, names: tuple[str, ...], extra: tuple[Path, ...] = ()) -> _Rules | None:
    """The patterns of `names` in `folder` (and of `extra` files), in order. A line git would
    reject (a lone `!`, as psf/black's test fixtures ship) is skipped with a warning, once."""
    lines: list[tuple[str, Path, int]] = []
    for path in (*extra, *(folder / name for name in names)):
        try:
            text = confined.read_path(path).decode("utf-8", errors="replace")  # a pipe here must not block the walk
        except OSError:
            continue
        lines += [(line, path, number) for number, line in enumerate(text.splitlines(), start=1)
                  if line.strip() and not line.lstrip().startswith("#")]
    lines = [(bounded, path, number) for line, path, number in lines if (bounded := _bounded(line, path, number)) is not None]
    if not lines:
        return None
    spec = _compiled([line for line, _, _ in lines])
    if spec is None:  # compiled once; line by line only to find the line git would reject
        kept = []
        for line, path, number in lines:
            if _compiled([line]) is not None:
                kept.append((line, path, number))
            elif (str(path), number) not in _warned:
                _warned.add((str(path), number))
                log.warning("%s line %d: %r is not a valid ignore pattern; skipped it", path, number, line)
        lines = kept
        spec = _compiled([line for line, _, _ in lines]) if lines else None
    if spec is None:
        return None
    origins = tuple(f"{path} line {number} `{line.strip()}`" for line, path, number in lines)
    return _Rules(base, spec, origins if len(spec.patterns) == len(origins) else (), _any_pattern(spec))


def _ignored_by(rules: list[_Rules], rel: str, is_dir: bool) -> str | None:
    """gitignore semantics: the deepest folder's last matching pattern decides. The deciding
    pattern's origin when the path is ignored, else None."""
    decision: str | None = None
    for rule in rules:
        sub = rel[len(rule.base) + 1 :] if rule.base else rel
        path = sub + "/" if is_dir else sub
        if rule.any_pattern is not None and rule.any_pattern.match(path) is None:
            continue
        result = rule.spec.check_file(path)
        if result.include is not None:
            if not result.include:
                decision = None
            else:
                at = result.index
                decision = rule.origins[at] if rule.origins and at is not None and at < len(rule.origins) else "an ignore file"
    return decision


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _classify_symlink(entry: os.DirEntry[str] | _LinkEntry, root: str, parent_real: str) -> SkipReason:
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


def scan(root: Path, options: ScanOptions = ScanOptions(), stamps: TreeStamps | None = None) -> Iterator[FileRecord | Skip]:
    """Yield every file under `root` as a FileRecord to index or a Skip with its reason.

    Decisions here use names and stat only; content checks (binary, minified, unreadable)
    happen in `read_source`, so an unchanged file is never opened on refresh. `.gitignore`
    applies inside a git repository (or with options.gitignore "always"), `.ignore` and
    `.codewhereignore` everywhere. `stamps` collects the mtime of each folder listed and each
    ignore file read, for the next quick check (freshness.py).
    """
    root_real = os.path.realpath(root)
    if stamps is not None:
        _stamp_root_rules(root_real, options, stamps)
    yield from _walk([_top(root_real, options)], root_real, options, stamps)


def _stamp_root_rules(root_real: str, options: ScanOptions, stamps: TreeStamps) -> None:
    """git's info/exclude is read from outside the listings: stamped (or its absence) here."""
    exclude = os.path.join(root_real, ".git", "info", "exclude")
    if options.gitignore != "never" and os.path.exists(exclude):
        stamps.rules[".git/info/exclude"] = os.lstat(exclude).st_mtime_ns


def _top(root_real: str, options: ScanOptions) -> _Folder:
    """The root folder with its own ignore rules (and git's info/exclude inside a repository)."""
    mode = options.gitignore
    git = mode == "always" or (mode == "auto" and repository_root(Path(root_real)) is not None)
    top = _load_rules(Path(root_real), "", _ignore_names(git), (Path(root_real, ".git", "info", "exclude"),) if git else ())
    return _Folder(root_real, "", [top] if top else [], git)


class _Folder(NamedTuple):
    """A folder to walk: its real path, its path from the root, the rules of the folders above
    it (its own are added when it is listed), and whether .gitignore counts there."""

    path: str
    rel: str
    rules: list[_Rules]
    git: bool


def _walk(
    stack: list[_Folder], root_real: str, options: ScanOptions, stamps: TreeStamps | None = None,
) -> Iterator[FileRecord | Skip]:
    mode = options.gitignore
    while stack:
        folder, rel_folder, rules, git = stack.pop()
        try:
            listed_at = os.lstat(folder).st_mtime_ns  # before the listing: a change after it shows next time
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            yield Skip(rel_folder + "/", SkipReason.UNREADABLE)
            continue
        if stamps is not None:
            # a folder changed within the clock's grain of its listing may change again unseen
            # at the same mtime (git's "racily clean"): stamped as changed, listed again next time
            racy = time.time_ns() - listed_at < RACY_NS
            stamps.folders[rel_folder] = -1 if racy else listed_at
            for entry in entries:
                if entry.name in _IGNORE_NAMES:
                    with contextlib.suppress(OSError):
                        stamps.rules[f"{rel_folder}/{entry.name}" if rel_folder else entry.name] = entry.stat(
                            follow_symlinks=False).st_mtime_ns
        # a folder's own ignore files are read only when its listing holds one: trying to open
        # both in every folder was a quarter of a refresh's scan on Django (3,233 folders)
        if rel_folder:
            names = {e.name for e in entries}
            if mode == "auto" and not git and ".git" in names:
                git = True  # a repository nested in a plain folder
            if not _IGNORE_NAMES.isdisjoint(names):
                own = _load_rules(Path(folder), rel_folder, _ignore_names(git))
                rules = [*rules, own] if own else rules
        subfolders: list[_Folder] = []
        for entry in entries:
            rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
            if not _utf8(entry.name):
                yield Skip(shown_path(rel), SkipReason.NAME_NOT_UTF8)
                continue
            try:
                if entry.is_symlink():
                    yield Skip(rel, _classify_symlink(entry, root_real, folder))
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name in SKIPPED_DIRS:
                        yield Skip(rel + "/", SkipReason.BUILTIN_DIR)
                    elif (why := _ignored_by(rules, rel, is_dir=True)) is not None:
                        yield Skip(rel + "/", SkipReason.IGNORED, why)
                    else:
                        subfolders.append(_Folder(entry.path, rel, rules, git))
                elif entry.is_file(follow_symlinks=False):
                    yield _check_file(entry, rel, rules, options)
                else:
                    yield Skip(rel, SkipReason.NOT_REGULAR)
            except OSError:
                yield Skip(rel, SkipReason.UNREADABLE)
        stack.extend(reversed(subfolders))


def scan_paths(
    root: Path, paths: Iterable[str], options: ScanOptions = ScanOptions(), stamps: TreeStamps | None = None,
) -> Iterator[FileRecord | Skip]:
    """What `scan` would say of these paths (relative to `root`) and, for a folder, of
    everything under it: the same rules, without walking the rest of the tree. A path that
    does not exist yields nothing; nor does one under a folder the walk would not enter (a
    symlink, a built-in or ignored folder, a missing one). Each folder's rules are read once."""
    root_real = os.path.realpath(root)
    folders: dict[str, _Folder | None] = {"": _top(root_real, options)}
    wanted = {rel.strip("/") for rel in paths}
    if "" in wanted:
        if stamps is not None:
            _stamp_root_rules(root_real, options, stamps)
        yield from _walk([_top(root_real, options)], root_real, options, stamps)
        return
    for rel in sorted(wanted):
        if any(ancestor in wanted for ancestor in _ancestors(rel)):
            continue  # its folder is walked whole
        if not _utf8(rel):
            yield Skip(shown_path(rel), SkipReason.NAME_NOT_UTF8)
            continue
        parent = _entered(root_real, rel.rpartition("/")[0], folders, options)
        if parent is None:
            continue
        full = os.path.join(root_real, rel)
        name = rel.rpartition("/")[2]
        try:
            info = os.lstat(full)
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            yield Skip(rel, _classify_symlink(_LinkEntry(full), root_real, parent.path))
        elif stat.S_ISDIR(info.st_mode):
            if name in SKIPPED_DIRS:
                yield Skip(rel + "/", SkipReason.BUILTIN_DIR)
            elif (why := _ignored_by(parent.rules, rel, is_dir=True)) is not None:
                yield Skip(rel + "/", SkipReason.IGNORED, why)
            else:
                yield from _walk([_Folder(full, rel, parent.rules, parent.git)], root_real, options, stamps)
        elif stat.S_ISREG(info.st_mode):
            yield _check_file(_StatEntry(name, info), rel, parent.rules, options)
        else:
            yield Skip(rel, SkipReason.NOT_REGULAR)


def _utf8(name: str) -> bool:
    """Whether a name the file system gave is UTF-8: Python hands other bytes over as lone
    surrogates, which no UTF-8 consumer (SQLite, JSON, a terminal) accepts."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(rel: str) -> str:
    """A path printable everywhere: bytes that are not UTF-8 as `\\xff` escapes."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _ancestors(rel: str) -> Iterator[str]:
    """`a/b/c` → `a/b`, `a` (not the root)."""
    while "/" in rel:
        rel = rel.rpartition("/")[0]
        yield rel


def _entered(root_real: str, rel: str, folders: dict[str, _Folder | None], options: ScanOptions) -> _Folder | None:
    """The folder `rel` with the rules that apply inside it, or None when the walk never enters
    it. Folders above it are decided first, and every answer is kept in `folders`."""
    if rel in folders:
        return folders[rel]
    above = _entered(root_real, rel.rpartition("/")[0], folders, options)
    folder: _Folder | None = None
    if above is not None:
        path, name = os.path.join(root_real, rel), rel.rpartition("/")[2]
        is_dir = os.path.isdir(path) and not os.path.islink(path)
        if is_dir and name not in SKIPPED_DIRS and _ignored_by(above.rules, rel, is_dir=True) is None:
            git = above.git or (options.gitignore == "auto" and os.path.exists(os.path.join(path, ".git")))
            own_names = [n for n in _ignore_names(git) if os.path.exists(os.path.join(path, n))]
            own = _load_rules(Path(path), rel, tuple(own_names)) if own_names else None
            folder = _Folder(path, rel, [*above.rules, own] if own else above.rules, git)
    folders[rel] = folder
    return folder


class _StatEntry:
    """The part of os.DirEntry that `_check_file` reads, for a path found by name, not by listing."""

    def __init__(self, name: str, info: os.stat_result) -> None:
        self.name = name
        self._info = info

    def stat(self, follow_symlinks: bool = True) -> os.stat_result:
        return self._info


class _LinkEntry:
    """The part of os.DirEntry that `_classify_symlink` reads."""

    def __init__(self, path: str) -> None:
        self.path = path


def _ignore_names(git: bool) -> tuple[str, ...]:
    return IGNORE_FILES if git else ALWAYS_IGNORE_FILES


def _check_file(entry: os.DirEntry[str] | _StatEntry, rel: str, rules: list[_Rules], options: ScanOptions) -> FileRecord | Skip:
    if entry.name == ".git":  # a worktree's or submodule's pointer to its git folder: git's, not code
        return Skip(rel, SkipReason.BUILTIN_DIR)
    if entry.name in LOCKFILES:
        return Skip(rel, SkipReason.LOCKFILE)
    if (why := _ignored_by(rules, rel, is_dir=False)) is not None:
        return Skip(rel, SkipReason.IGNORED, why)
    lowered = entry.name.lower()
    if os.path.splitext(lowered)[1] in ASSET_EXTENSIONS:
        return Skip(rel, SkipReason.ASSET)
    if not options.include_minified and lowered.endswith(MINIFIED_SUFFIXES):
        return Skip(rel, SkipReason.MINIFIED)
    stat = entry.stat(follow_symlinks=False)
    if stat.st_size > options.max_bytes:
        return Skip(rel, SkipReason.TOO_LARGE)
    language = language_of(rel)
    return FileRecord(rel, kind_of(rel, language), language, stat.st_size, stat.st_mtime_ns)


def looks_minified(data: bytes) -> bool:
    """Minified or generated text: long enough, and its lines average over MINIFIED_MEAN_LINE."""
    return len(data) >= MINIFIED_MIN_BYTES and len(data) / (data.count(b"\n") + 1) > MINIFIED_MEAN_LINE


_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def file_digest(data: bytes) -> str:
    """What the index records of a file's bytes: a changed file has another."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def read_source(root: Path, rel: str, include_minified: bool = True) -> tuple[bytes, str] | SkipReason:
    """The bytes and text of `rel` under `root`, or why it can't be indexed. Read through
    `confined`: never through a link, never from a pipe or device, even one swapped in since the
    scan. Invalid UTF-8 is replaced, not fatal; a UTF-16 file with its byte-order mark is decoded
    (its NUL bytes are not binary)."""
    try:
        data = confined.read_bytes(root, rel)
    except confined.NotRegularFile:
        return SkipReason.NOT_REGULAR
    except OSError:
        return SkipReason.UNREADABLE
    if data.startswith(_UTF16_BOMS):
        text = data.decode("utf-16", errors="replace").removeprefix("\ufeff")
        if "\0" in text[:BINARY_PROBE_BYTES]:
            return SkipReason.BINARY
        return data, text
    if b"\0" in data[:BINARY_PROBE_BYTES]:
        return SkipReason.BINARY
    if not include_minified and looks_minified(data):
        return SkipReason.MINIFIED
    text = data.decode("utf-8", errors="replace")
    return data, text.removeprefix("\ufeff")
