"""What git says of a folder: its git directory, the branch and commit checked out, whether the
work tree differs from it. Read with the `git` program when there is one; a folder outside a
repository, or a machine without git, has no answer, never an error.

A repository brings its own configuration (`.git/config`, `.gitattributes`), and some of it names
programs git runs: an fsmonitor hook, clean and process filters, hooks such as post-index-change
that fire when git rewrites its index. A repository unpacked from an archive or found on a shared
volume is not trusted, so every call here turns those off from the command line (which outranks
every configuration file), never writes the index, and skips submodules (each has a configuration
of its own)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

GIT_SECONDS = 10.0


@dataclass(frozen=True)
class GitState:
    branch: str | None  # None when HEAD is detached
    commit: str  # "" before the first commit
    dirty: bool | None = None  # None when not asked


# Settings that keep git from running a program the repository names, on every call.
_UNTRUSTING = ("-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}", "--no-optional-locks")


def _git(root: Path, *args: str) -> str | None:
    # outside any repository, asking git costs two processes (5 ms) of every index run there
    if shutil.which("git") is None or ("GIT_DIR" not in os.environ and repository_root(root) is None):
        return None
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat"}
    try:
        done = subprocess.run(["git", *_UNTRUSTING, "-C", str(root), *args], capture_output=True, text=True,
                              timeout=GIT_SECONDS, check=False, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def repository_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` holding `.git` (a folder, or a worktree's file),
    looked for from the real folder, as git does."""
    start = start.resolve()
    return next((folder for folder in (start, *start.parents) if (folder / ".git").exists()), None)


def git_dir(root: Path) -> Path | None:
    """The folder git keeps this work tree's state in (`.git`, or a worktree's own folder)."""
    found = _git(root, "rev-parse", "--absolute-git-dir")
    return Path(found) if found else None


def state(root: Path, dirty: bool = False) -> GitState | None:
    """The branch and commit checked out in `root`; with `dirty`, whether tracked files differ."""
    head = _git(root, "rev-parse", "HEAD", "--abbrev-ref", "HEAD")  # the commit, then the branch
    if head is not None:
        commit, _, branch = head.partition("\n")
    elif (unborn := _git(root, "symbolic-ref", "--short", "HEAD")) is not None:
        commit, branch = "", unborn  # a repository without a commit yet
    else:
        return None
    changed = None
    if dirty:
        changed = _differs(root)
    return GitState(None if branch == "HEAD" else branch, commit, changed)


def _filters_off(root: Path) -> list[str] | None:
    """`-c` options that empty every filter driver the configuration names (`git status` runs a
    file's clean filter to compare it): None when a driver's name cannot be passed that way."""
    listed = _git(root, "config", "--null", "--get-regexp", r"^filter\.")
    options: list[str] = []
    for item in (listed or "").split("\0"):
        key = item.partition("\n")[0]
        if not key.startswith("filter.") or key.count(".") < 2:
            continue
        name = key[len("filter."):key.rindex(".")]
        if "=" in name:  # `-c` splits at the first `=`: such a driver could not be switched off
            return None
        for setting in ("clean", "smudge", "process"):
            options += ["-c", f"filter.{name}.{setting}="]
        options += ["-c", f"filter.{name}.required=false"]
    return options


def _differs(root: Path) -> bool | None:
    """Whether tracked files differ from the commit, with every filter driver switched off (a
    file a filter would have changed then counts as changed: the safe side)."""
    filters_off = _filters_off(root)
    if filters_off is None:
        return None
    porcelain = _git(root, *filters_off, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all")
    return None if porcelain is None else bool(porcelain)
