"""Write the outputs README.md and docs/guide.md show by running the commands they show, so an
example cannot drift from what codewhere prints (as docs/cli.md is written from --help).

    python scripts/doc_examples.py            # rewrite the generated blocks in place
    python scripts/doc_examples.py --check    # exit 1, naming the stale blocks, when a block differs

Each generated block follows a marker line `<!-- generated: NAME -->`; NAME says which command
made it (EXAMPLES below). The corpus is psf/requests 2.32.3, downloaded from PyPI as README's
first command does, indexed with the default model into a fresh cache folder.
tests/test_docs.py runs the check.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", ROOT / "docs" / "guide.md")
README_CORPUS = "/tmp/cw/requests-2.32.3"  # where README's commands put it
MARKER = re.compile(r"<!-- generated: ([a-z0-9-]+) -->\n```(\w*)\n(.*?)```", re.S)


def download_requests(folder: Path) -> Path | None:
    """psf/requests 2.32.3 as README's first command fetches it; None without a network to PyPI."""
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                           "requests==2.32.3", "-d", str(folder)], capture_output=True, text=True, timeout=120)
    archive = folder / "requests-2.32.3.tar.gz"
    if done.returncode != 0 or not archive.is_file():
        return None
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return folder / "requests-2.32.3"


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv[:4])} … failed: {done.stderr.strip()}")
    return done.stdout


def _readme_python(corpus: Path, env: dict[str, str], work: Path) -> str:
    """What README's Python example prints."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("```python\n", readme.index("## From Python")) + len("```python\n")
    code = readme[start : readme.index("```", start)].replace(README_CORPUS, str(corpus))
    return _run([sys.executable, "-c", code], env, work)


def _codewhere(command: str, query: str, *options: str) -> Callable[[Path, dict[str, str], Path], str]:
    def run(corpus: Path, env: dict[str, str], work: Path) -> str:
        return _run([sys.executable, "-m", "codewhere", command, query, str(corpus), *options], env, work)
    return run


def _search_json(corpus: Path, env: dict[str, str], work: Path) -> str:
    """`search --json` of guide.md, its root shown as a placeholder and its snippet cut to one line."""
    answer = json.loads(_codewhere("search", "raise_for_status", "-k", "1", "--json")(corpus, env, work))
    answer["root"] = "/abs/path/requests"
    for hit in answer["hits"]:
        hit["snippet"] = hit["snippet"].splitlines()[0] + "\n ..."

    def compact(value: object) -> str:
        return json.dumps(value, ensure_ascii=False)

    # a field a line, each value on its line (a hit's fields indented under it)
    lines = [f" {compact(key)}: {compact(value)}," for key, value in answer.items() if key != "hits"]
    hits = [",\n".join(f"   {compact(k)}: {compact(v)}" for k, v in hit.items()) for hit in answer["hits"]]
    return "{\n" + "\n".join(lines) + '\n "hits": [\n  {\n' + "\n  },\n  {\n".join(hits) + "\n  }\n ]\n}\n"


EXAMPLES: dict[str, Callable[[Path, dict[str, str], Path], str]] = {
    "readme-python": _readme_python,
    "guide-search": _codewhere("search", "raise_for_status", "-k", "1"),
    "guide-json": _search_json,
}


def generate(corpus: Path) -> dict[Path, str]:
    """Each doc with its generated blocks as the commands print them now."""
    outputs: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="codewhere-doc-examples-") as folder:
        work = Path(folder)
        # one worker: chunk ids (the `evidence` the JSON example shows) follow the order files are written
        env = {**os.environ, "CODEWHERE_CACHE_DIR": str(work / "cache"), "CODEWHERE_WORKERS": "1", "NO_COLOR": "1"}
        env.pop("CODEWHERE_DSN", None)

        def fill(match: re.Match[str]) -> str:
            name, fence = match.group(1), match.group(2)
            if name not in EXAMPLES:
                raise SystemExit(f"no example named {name!r}; known: {', '.join(EXAMPLES)}")
            if name not in outputs:
                outputs[name] = EXAMPLES[name](corpus, env, work)
            return f"<!-- generated: {name} -->\n```{fence}\n{outputs[name]}```"

        return {doc: MARKER.sub(fill, doc.read_text(encoding="utf-8")) for doc in DOCS}


def stale(generated: dict[Path, str]) -> list[str]:
    """`doc: block` for every generated block that differs from the doc as it is."""
    found = []
    for doc, text in generated.items():
        now = {m.group(1): m.group(3) for m in MARKER.finditer(doc.read_text(encoding="utf-8"))}
        for match in MARKER.finditer(text):
            if now.get(match.group(1)) != match.group(3):
                found.append(f"{doc.relative_to(ROOT)}: {match.group(1)}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say which blocks are stale (exit 1 if any)")
    parser.add_argument("--corpus", type=Path, help="requests 2.32.3 already unpacked here (default: download it)")
    args = parser.parse_args()
    corpus = args.corpus or download_requests(Path(tempfile.mkdtemp(prefix="codewhere-requests-")))
    if corpus is None:
        print("cannot download requests 2.32.3 from PyPI: pass --corpus DIR", file=sys.stderr)
        return 2
    generated = generate(corpus)
    if args.check:
        found = stale(generated)
        print("\n".join(found) or "every generated block is current")
        return 1 if found else 0
    for doc, text in generated.items():
        doc.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
