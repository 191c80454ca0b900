"""What git says of a folder: its git directory, the branch and commit checked out, whether the
work tree differs from it. Read with the `git` program when there is one; a folder outside a
repository, or a machine without git, has no answer, never an error."""

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


def _git(root: Path, *args: str) -> str | None:
    # outside any repository, asking git costs two processes (5 ms) of every index run there
    if shutil.which("git") is None or ("GIT_DIR" not in os.environ and repository_root(root) is None):
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=GIT_SECONDS,
                              check=False)
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
        porcelain = _git(root, "status", "--porcelain", "--untracked-files=no")
        changed = None if porcelain is None else bool(porcelain)
    return GitState(None if branch == "HEAD" else branch, commit, changed)
