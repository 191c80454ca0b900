"""Benchmark corpora, fetched at run time into a cache outside the repository, never committed.

A corpus comes from a local git checkout or bare mirror at a pinned ref (`git archive`), or from
PyPI as an sdist (`pip download --no-binary :all:`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import platformdirs

CACHE = Path(os.environ.get("CODEWHERE_BENCH_CACHE") or platformdirs.user_cache_dir("codewhere-bench"))


def from_git(mirror: str | Path, ref: str, name: str, subtree: str | None = None) -> Path:
    """Export `ref` of a git repository (bare or not) into the cache; reused when present.
    With `subtree`, only that folder (snapshots may lack large files elsewhere)."""
    target = CACHE / "git" / f"{name}-{ref}"
    if not target.exists():
        tmp = target.with_name(target.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        command = ["git", "-C", str(mirror), "archive", ref, *(["--", subtree] if subtree else [])]
        archive = subprocess.run(command, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        tmp.rename(target)
    return target


_GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
            "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


def git(root: Path, *args: str) -> None:
    """Run git in `root`, with an author set, failing loudly."""
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=_GIT_ENV)


def git_snapshot(tree: Path, where: Path) -> Path:
    """A copy of `tree` at `where`, committed to a new git repository on branch main."""
    shutil.copytree(tree, where, symlinks=True)
    git(where, "init", "-q", "-b", "main")
    git(where, "add", "-A")
    git(where, "commit", "-qm", "snapshot")
    return where


def from_sdist(package: str, version: str) -> Path:
    """Download and unpack an sdist from PyPI into the cache; reused when present."""
    base = CACHE / "sdist"
    target = base / f"{package}-{version}"
    if target.exists():
        return target
    download = base / "downloads"
    download.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         f"{package}=={version}", "-d", str(download)],
        check=True,
    )
    archives = [p for p in download.iterdir() if p.name.lower().replace("_", "-").startswith(f"{package.lower()}-{version}")]
    if not archives:
        raise SystemExit(f"no sdist for {package}=={version} in {download}")
    archive = archives[0]
    unpacked = base / "unpack"
    if archive.suffix == ".zip":
        zipfile.ZipFile(archive).extractall(unpacked)
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data")
    inner = next(p for p in unpacked.iterdir() if p.name.lower().replace("_", "-").startswith(f"{package.lower()}-{version}"))
    inner.rename(target)
    return target


def requests_corpus(mirror: str | None) -> Path:
    """psf/requests v2.32.3: the git tag where a mirror is given (the study's 129 files), else the sdist."""
    if mirror:
        return from_git(mirror, "v2.32.3", "requests")
    return from_sdist("requests", "2.32.3")


def cold_index(root: Path, settings, **kwargs):  # noqa: ANN001, ANN201 — Settings in, Index out
    """`root`'s SQLite index opened from nothing, as a first `codewhere index` builds it (a
    rebuild would build beside the old one and copy it in: not a cold build)."""
    from codewhere.api import Index
    from codewhere.store import SqliteStore

    SqliteStore.remove(settings.index_path_for(root.resolve()))
    return Index.open(root, settings=settings, **kwargs)
