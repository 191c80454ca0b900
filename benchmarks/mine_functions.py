"""Mine "commit subject → the one function it changed" from the history of semble's benchmark repositories.

    python benchmarks/mine_functions.py --mirrors DIR --out FILE [--split dev] [--repo NAME ...]

For each repository of ../shared/semble-bench/repos.json (its git mirror under DIR), the
first-parent history before the pinned `revision` is read newest first. A commit becomes a
question when:

- its diff against its first parent (a merged pull request's whole change, titled by the pull
  request) changes lines of exactly one non-test source file in a language with a grammar
  (test files, docs and other files may change beside it), under the benchmark's root;
- every changed line of that file lies inside one function or method (the innermost symbol
  holding them all, by the same parser the index uses);
- its subject, without a conventional-commit prefix or a PR number, has at least five words,
  is not a merge, revert, release, version bump, formatting, typo, lint, docs, test, refactor,
  rename or clean-up message, and names neither the function nor what encloses it (as written
  or as one compound word) nor all of the function's split words;
- the function still exists at the pinned revision: one function of the same qualified name
  in the same file. Gold is that file and the function's lines there.

One question per function (the newest commit), at most --per-repo per repository. The output
is derived from fetched repositories: it is regenerated, never committed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.languages import kind_of, language_of  # noqa: E402
from codewhere.parse import has_grammar, parse  # noqa: E402
from codewhere.tokens import compound, split_identifier  # noqa: E402
from codewhere.types import FileKind, Symbol  # noqa: E402
from semble_bench import SHARED, mirror_for  # noqa: E402
from splits import SPLITS  # noqa: E402

FUNCTION_KINDS = frozenset({"function", "method"})
MIN_WORDS = 5
_PREFIX = re.compile(r"^\s*(\[[^\]]*\]\s*)*([a-z]+(\([^)]*\))?!?:\s*)?", re.IGNORECASE)
_PR_NUMBER = re.compile(r"\s*\((#|gh-)?\d+\)\s*$|\s+#\d+\s*$")
_NOT_BEHAVIOUR = re.compile(
    r"^(merge|revert|release|releasing|bump|version|v?\d+\.\d+|prepare|changelog|update changelog|format|reformat"
    r"|fix(ed)? typos?|typos?|lint|style|whitespace|docs?|documentation|comments?|tests?|refactor(ing)?|rename"
    r"|clean ?up|cleanup|chore|ci|wip|minor|tidy|update (deps|dependencies)|upgrade)\b",
    re.IGNORECASE,
)
_NOT_BEHAVIOUR_ANYWHERE = re.compile(r"\b(typo|typos|rubocop|gofmt|prettier|eslint|clippy|formatting|lint|bump|docstrings?)\b",
                                     re.IGNORECASE)
# gitmoji for refactoring, docs, formatting, dependency bumps, configuration, typos, lint and style
_NOT_BEHAVIOUR_EMOJI = ("\u267b", "\U0001f4dd", "\U0001f3a8", "\u2b06", "\U0001f527", "\u270f", "\U0001f6a8", "\U0001f484",
                        "\U0001f516", "\U0001f500", "\u23ea")
_LEADING_SYMBOLS = re.compile(r"^[^\w`'\"(\[]+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class FunctionQuery:
    repo: str
    language: str
    query: str  # the commit subject, cleaned
    path: str  # relative to the benchmark root
    line: int  # the function's first line at the pinned revision
    end_line: int
    name: str
    qualified_name: str
    commit: str


@dataclass
class _Change:
    commit: str
    subject: str
    files: dict[str, set[int]]  # path → changed lines on the new side


def _history(mirror: Path, revision: str, root: str, limit: int) -> Iterator[_Change]:
    """First-parent commits before `revision`, newest first, with their changed lines (-U0)."""
    command = ["git", "-C", str(mirror), "log", "--first-parent", "--diff-merges=first-parent", "-U0", "--no-renames", "--no-color",
               "--diff-filter=M", f"-n{limit}", "--format=@@@%H%x1f%s", revision, "--", root or "."]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, errors="replace")
    assert process.stdout is not None
    change: _Change | None = None
    path: str | None = None
    for line in process.stdout:
        if line.startswith("@@@"):
            if change is not None:
                yield change
            sha, _, subject = line[3:].rstrip("\n").partition("\x1f")
            change, path = _Change(sha, subject, {}), None
        elif change is None:
            continue
        elif line.startswith("+++ "):
            target = line[4:].rstrip("\n")
            path = target[2:] if target.startswith("b/") else None
            if path is not None:
                change.files.setdefault(path, set())
        elif line.startswith("@@ ") and path is not None:
            match = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", line)
            if match:
                start, count = int(match.group(1)), int(match.group(2) or "1")
                change.files[path].update(range(start, start + count) if count else [max(start, 1)])
    if change is not None:
        yield change
    process.wait()


_MERGE = re.compile(r"^Merge (pull request|branch|remote-tracking branch)\b")


def _subject(mirror: Path, change: _Change) -> str:
    """The commit's subject; for a pull request merged with a merge commit, the pull request's
    title (the first line of the merge's body)."""
    if not _MERGE.match(change.subject):
        return change.subject
    body = subprocess.run(["git", "-C", str(mirror), "log", "-1", "--format=%b", change.commit],
                          capture_output=True, text=True, errors="replace").stdout
    return next((line.strip() for line in body.splitlines() if line.strip()), "")


def _counts(path: str) -> bool:
    """A change to this file counts: code (not a test) in a language with a grammar."""
    language = language_of(path)
    return bool(language) and has_grammar(language) and kind_of(path, language) is FileKind.CODE


def show_file(mirror: Path, revision: str, path: str) -> str | None:
    shown = subprocess.run(["git", "-C", str(mirror), "show", f"{revision}:{path}"], capture_output=True)
    return shown.stdout.decode("utf-8", "replace") if shown.returncode == 0 else None


def _innermost(symbols: list[Symbol], lines: set[int]) -> Symbol | None:
    """The smallest function or method holding every line, if the smallest symbol holding them is one."""
    holding = [s for s in symbols if s.start_line <= min(lines) and max(lines) <= s.end_line]
    if not holding:
        return None
    smallest = min(holding, key=lambda s: s.end_line - s.start_line)
    return smallest if smallest.kind in FUNCTION_KINDS else None


def clean_subject(subject: str) -> str:
    """The subject without a conventional-commit prefix, a PR number or a leading emoji; "" when
    the emoji marks a refactoring, docs, formatting or a bump."""
    subject = subject.strip()
    if subject.startswith(_NOT_BEHAVIOUR_EMOJI):
        return ""
    subject = _LEADING_SYMBOLS.sub("", subject)
    return _PR_NUMBER.sub("", _PREFIX.sub("", subject, count=1)).strip().rstrip(".")


def describes_behaviour(subject: str, qualified_name: str) -> bool:
    """A subject of five words or more that describes behaviour and names neither the function
    nor what encloses it (`Session.send`: neither `send` nor `Session`), as written or as a
    compound, nor all of the function's split words."""
    words = _WORD.findall(subject)
    if len(words) < MIN_WORDS or _NOT_BEHAVIOUR.match(subject) or _NOT_BEHAVIOUR_ANYWHERE.search(subject):
        return False
    said = {w.lower() for w in words} | {compound(w) for w in re.findall(r"[\w$]+", subject)}
    segments = [s for s in re.split(r"[.:#]+|->", qualified_name) if s]
    if any(compound(segment) in said for segment in segments):
        return False
    parts = {p for p in split_identifier(segments[-1]) if len(p) >= 3} if segments else set()
    return not parts or not parts <= said


def mine_repo(spec: dict[str, str], mirror: Path, per_repo: int, scan: int) -> list[FunctionQuery]:
    root = spec.get("benchmark_root") or ""
    prefix = f"{root.rstrip('/')}/" if root else ""
    found: dict[tuple[str, str], FunctionQuery] = {}
    for change in _history(mirror, spec["revision"], root, scan):
        sources = [p for p in change.files if _counts(p)]
        if len(sources) != 1 or not sources[0].startswith(prefix) or not change.files[sources[0]]:
            continue
        path = sources[0]
        subject = clean_subject(_subject(mirror, change))
        text = show_file(mirror, change.commit, path)
        parsed = parse(language_of(path), text) if text is not None else None
        changed = _innermost(parsed.symbols, change.files[path]) if parsed else None
        if changed is None or (path, changed.qualified_name) in found or not describes_behaviour(subject, changed.qualified_name):
            continue
        now = show_file(mirror, spec["revision"], path)
        at_snapshot = parse(language_of(path), now) if now is not None else None
        same = [s for s in (at_snapshot.symbols if at_snapshot else []) if s.qualified_name == changed.qualified_name
                and s.kind in FUNCTION_KINDS]
        if len(same) != 1:
            continue
        gold = same[0]
        found[(path, changed.qualified_name)] = FunctionQuery(
            spec["name"], language_of(path), subject, path[len(prefix):], gold.start_line, gold.end_line, gold.name,
            gold.qualified_name, change.commit,
        )
        if len(found) >= per_repo:
            break
    return list(found.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", default=os.environ.get("CODEWHERE_BENCH_MIRRORS"), required=not os.environ.get("CODEWHERE_BENCH_MIRRORS"),
                        metavar="DIR", help="git mirrors of the benchmark repositories, DIR/<owner>+<name>/repo (or CODEWHERE_BENCH_MIRRORS)")
    parser.add_argument("--out", required=True, metavar="FILE", help="where to write the questions (JSON)")
    parser.add_argument("--split", choices=sorted(SPLITS), action="append", default=[], help="the repos of this split (repeatable)")
    parser.add_argument("--repo", action="append", default=[], help="only these repos (repeatable)")
    parser.add_argument("--per-repo", type=int, default=25, help="questions per repository at most")
    parser.add_argument("--scan", type=int, default=4000, help="commits read per repository at most")
    args = parser.parse_args()
    wanted = set(args.repo) | {name for split in args.split for name in SPLITS[split]}
    specs = [s for s in json.loads((SHARED / "repos.json").read_text()) if not wanted or s["name"] in wanted]
    questions: list[FunctionQuery] = []
    for spec in specs:
        mirror = mirror_for(spec["url"], Path(args.mirrors))
        if mirror is None:
            print(f"{spec['name']}: no mirror, skipped", file=sys.stderr)
            continue
        mined = mine_repo(spec, mirror, args.per_repo, args.scan)
        print(f"{spec['name']:<20} {len(mined):>3} questions", file=sys.stderr, flush=True)
        questions.extend(mined)
    Path(args.out).write_text(json.dumps([asdict(q) for q in questions], indent=1, ensure_ascii=False))
    print(f"{len(questions)} questions from {len({q.repo for q in questions})} repositories -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
