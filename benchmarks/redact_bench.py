"""Secrets redaction: what it catches on a corpus of known formats, and what it costs on a tree.

    python benchmarks/redact_bench.py TREE [TREE ...] [--runs 3]

Prints (1) how many of tests/fixtures/secret_corpus.json's formats are caught by
codewhere.redact and by the private regular-expression list it replaced, and how many clean
lines each leaves alone; (2) on every text line of the trees, the time per line with the cheap
pre-test and without it (detect-secrets on every line), and whether both find the same secrets.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

from codewhere import redact as redaction
from codewhere.scan import read_source, scan
from codewhere.types import FileRecord

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "secret_corpus.json"

# the private list codewhere used before detect-secrets (mcp_server.py at 36daa56), for the count
_OLD = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S), "[REDACTED]"),
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), "[REDACTED]"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"), "[REDACTED]"),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}\b"), "[REDACTED]"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"), "[REDACTED]"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"), "[REDACTED]"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), "[REDACTED]"),
    (re.compile(r"(?i)((?:api[_-]?key|secret|password|passwd|token)\s*[:=]\s*)(['\"])[^'\"\s]{8,}\2"), r"\1\2[REDACTED]\2"),
]


def old_redact(text: str) -> str:
    for pattern, replacement in _OLD:
        text = pattern.sub(replacement, text)
    return text


def corpus_counts() -> dict[str, object]:
    corpus = json.loads(CORPUS.read_text())
    out: dict[str, object] = {"formats": len(corpus["secrets"]), "clean_lines": len(corpus["clean"])}
    for name, fn in (("codewhere.redact", redaction.redact), ("old private list", old_redact)):
        caught = [c["format"] for c in corpus["secrets"] if "[REDACTED]" in fn(c["text"])]
        out[name] = {"caught": len(caught), "missed": sorted({c["format"] for c in corpus["secrets"]} - set(caught)),
                     "clean_left_alone": sum(fn(line) == line for line in corpus["clean"])}
    return out


def tree_lines(roots: list[Path]) -> list[str]:
    lines: list[str] = []
    for root in roots:
        for item in scan(root):
            if isinstance(item, FileRecord):
                source = read_source(root, item.path)
                if isinstance(source, tuple):
                    lines += source[1].split("\n")
    return lines


def timed(lines: list[str], prefilter: bool) -> tuple[float, set[tuple[int, str]]]:
    original = redaction._MAY_HOLD_SECRET
    if not prefilter:
        redaction._MAY_HOLD_SECRET = re.compile("")  # matches every line
    try:
        started = time.perf_counter()
        found = {(i, value) for i, line in enumerate(lines) for value in redaction.secrets_in_line(line)}
        return time.perf_counter() - started, found
    finally:
        redaction._MAY_HOLD_SECRET = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps({"corpus": corpus_counts()}, indent=1))
    lines = tree_lines(args.trees)
    runs: dict[str, list[float]] = {"with pre-test": [], "every line": []}
    findings: dict[str, set[tuple[int, str]]] = {}
    for _ in range(args.runs):
        for name, prefilter in (("with pre-test", True), ("every line", False)):
            seconds, findings[name] = timed(lines, prefilter)
            runs[name].append(seconds)
    passing = sum(bool(redaction._MAY_HOLD_SECRET.search(line)) for line in lines)
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import transient_settings

    with transient_settings(redaction._settings()):
        reference = {(i, s.secret_value) for i, line in enumerate(lines) if redaction._MAY_HOLD_SECRET.search(line)
                     for s in scan_line(line) if s.secret_value and len(s.secret_value) >= redaction.MIN_SECRET_CHARS}
    ours = {(i, v) for i, v in findings["with pre-test"]}
    print(json.dumps({
        "lines": len(lines),
        "detect_secrets_scan_line_findings": len(reference),
        "of_those_found_here": len(reference & ours),
        "found_here_beyond_scan_line": len(ours - reference), "lines_passing_the_pre_test": passing,
        **{f"{name} µs/line (median of {args.runs})": round(statistics.median(v) / len(lines) * 1e6, 2) for name, v in runs.items()},
        "same_findings": findings["with pre-test"] == findings["every line"],
        "secrets_found": len(findings["with pre-test"]),
    }, indent=1))


if __name__ == "__main__":
    main()
