"""Step 1 of training the static model on code: gather the corpus (packages.py) into a folder.

    python scripts/static_training/corpus.py [--cache DIR] [--record]

Downloads every pinned package once into DIR/downloads (PyPI's JSON simple index and npm's
registry give the file and its hash; Debian packages come through apt with a private deb-src
list, signature-checked by apt), checks its sha256 against corpus-lock.json (`--record` writes the
lock instead), unpacks it with tarfile's `data` filter (no links out, no devices), and copies the
files of the wanted languages into DIR/corpus/<language>/<package>/…, at most BYTES_PER_LANGUAGE
per language in a fixed pseudo-random order, so that no language or package drowns the rest.
Nothing downloaded is run. Step 2 (teacher.py) indexes DIR/corpus with codewhere itself, so the
texts are the chunks exactly as the index embeds them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from packages import EXCLUDED, PACKAGES, Package

from codewhere.embed.onnx import file_sha256
from codewhere.languages import language_of

HERE = Path(__file__).resolve().parent
LOCK = HERE / "corpus-lock.json"
BYTES_PER_LANGUAGE = 2_500_000
MAX_FILE_BYTES = 150_000  # bundles and generated tables, not code people write
SKIPPED_NAMES = (".min.js", ".bundle.js", ".d.ts.map", ".js.map")
APT_SOURCES = "deb-src http://deb.debian.org/debian bookworm main\n"


def default_cache() -> Path:
    return Path.home() / ".cache" / "codewhere-train"


def _get(url: str, accept: str = "*/*") -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "codewhere-corpus"})
    with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 — pinned registry URLs
        return bytes(response.read())


def _pypi(package: Package, into: Path) -> list[Path]:
    index = json.loads(_get(f"https://pypi.org/simple/{package.name}/", "application/vnd.pypi.simple.v1+json"))
    wanted = [f for f in index["files"] if f["filename"].lower() == f"{package.name}-{package.version}.tar.gz".lower()]
    if not wanted:
        raise SystemExit(f"corpus: no sdist {package.name}-{package.version}.tar.gz on PyPI")
    target = into / wanted[0]["filename"]
    target.write_bytes(_get(wanted[0]["url"]))
    return [target]


def _npm(package: Package, into: Path) -> list[Path]:
    quoted = package.name.replace("/", "%2f")
    meta = json.loads(_get(f"https://registry.npmjs.org/{quoted}/{package.version}"))
    target = into / (package.name.replace("/", "_") + f"-{package.version}.tgz")
    target.write_bytes(_get(meta["dist"]["tarball"]))
    return [target]


def _apt_options(cache: Path) -> list[str]:
    state = cache / "apt"
    (state / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (state / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    sources = state / "sources.list"
    sources.write_text(APT_SOURCES)
    return ["-o", f"Dir::Etc::SourceList={sources}", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={state / 'lists'}", "-o", f"Dir::Cache={state / 'cache'}"]


def _deb(package: Package, into: Path) -> list[Path]:
    subprocess.run(["apt-get", "download", f"{package.name}={package.version}"], cwd=into, check=True,
                   capture_output=True)
    return sorted(into.glob("*.deb"))


def _debsrc(package: Package, into: Path, cache: Path) -> list[Path]:
    options = _apt_options(cache)
    if not any((cache / "apt" / "lists").glob("*Sources*")):
        subprocess.run(["apt-get", *options, "update"], check=True, capture_output=True)
    # only the upstream tarball is used: a missing Debian patch file (this mirror lacks some) is no failure
    fetched = subprocess.run(["apt-get", *options, "source", "--download-only", f"{package.name}={package.version}"],
                             cwd=into, capture_output=True, text=True)
    upstream = sorted(p for p in into.iterdir() if ".orig" in p.name and ".asc" not in p.name)
    for other in set(into.iterdir()) - set(upstream):
        other.unlink()
    if not upstream:
        raise SystemExit(f"corpus: apt could not fetch {package.name}={package.version}: {fetched.stderr.strip()[-300:]}")
    return upstream


def download(package: Package, cache: Path) -> list[Path]:
    folder = cache / "downloads" / package.source / package.name.replace("/", "_") / package.version
    if folder.is_dir() and any(folder.iterdir()):
        return sorted(p for p in folder.iterdir() if p.is_file() and (package.source != "debsrc" or ".orig" in p.name))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if package.source == "pypi":
            return _pypi(package, folder)
        if package.source == "npm":
            return _npm(package, folder)
        if package.source == "deb":
            return _deb(package, folder)
        return [p for p in _debsrc(package, folder, cache) if p.is_file()]
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def unpack(archive: Path, into: Path) -> None:
    if archive.suffix == ".deb":
        with tempfile.TemporaryDirectory() as scratch:
            subprocess.run(["dpkg-deb", "--fsys-tarfile", str(archive)], check=True,
                           stdout=(Path(scratch) / "data.tar").open("wb"))
            unpack(Path(scratch) / "data.tar", into)
        return
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")


def pick_files(unpacked: Path, languages: tuple[str, ...]) -> list[tuple[str, Path]]:
    """(language, file) of the wanted languages, skipping bundles and oversized files."""
    chosen = []
    for path in sorted(unpacked.rglob("*")):
        if not path.is_file() or path.is_symlink() or path.name.endswith(SKIPPED_NAMES):
            continue
        language = language_of(str(path.relative_to(unpacked)))
        if language in languages and 0 < path.stat().st_size <= MAX_FILE_BYTES:
            chosen.append((language, path))
    return chosen


def _order_key(package: Package, relative: str) -> str:
    return hashlib.sha256(f"{package.name}/{relative}".encode()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=default_cache())
    parser.add_argument("--record", action="store_true", help="write corpus-lock.json instead of checking it")
    args = parser.parse_args()
    for package in PACKAGES:
        bare = package.name.rsplit("/", 1)[-1].lower()
        if bare in EXCLUDED:
            raise SystemExit(f"corpus: {package.name} is a benchmark repository; remove it from packages.py")
    lock: dict[str, dict[str, str]] = json.loads(LOCK.read_text()) if LOCK.exists() and not args.record else {}
    recorded: dict[str, dict[str, str]] = {}
    candidates: dict[str, list[tuple[str, Package, str, Path]]] = {}
    work = args.cache / "unpacked"
    for package in PACKAGES:
        key = f"{package.source}:{package.name}=={package.version}"
        files = download(package, args.cache)
        hashes = {f.name: file_sha256(f) for f in files}
        if not args.record and lock.get(key) != hashes:
            raise SystemExit(f"corpus: {key} does not match corpus-lock.json ({hashes}); rerun with --record "
                             "only if the pin was changed on purpose")
        recorded[key] = hashes
        target = work / package.source / package.name.replace("/", "_")
        if not target.is_dir():
            target.mkdir(parents=True)
            for archive in files:
                unpack(archive, target)
        for language, path in pick_files(target, package.languages):
            relative = str(path.relative_to(target))
            candidates.setdefault(language, []).append((_order_key(package, relative), package, relative, path))
        print(f"{key}: {len(files)} archive(s)", file=sys.stderr)
    if args.record:
        LOCK.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    corpus = args.cache / "corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    summary = {}
    for language, entries in sorted(candidates.items()):
        taken = 0
        count = 0
        for _, package, relative, path in sorted(entries, key=lambda e: e[0]):
            size = path.stat().st_size
            if taken + size > BYTES_PER_LANGUAGE:
                continue
            destination = corpus / language / package.name.replace("/", "_") / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
            taken += size
            count += 1
        summary[language] = {"files": count, "bytes": taken}
    (args.cache / "corpus-summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    for language, numbers in summary.items():
        print(f"{language:12} {numbers['files']:6,} files {numbers['bytes']:12,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
