"""Answers → text for people (output.py gives the same answers as data). Nothing here searches."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from codewhere.gitinfo import GitState
from codewhere.graph import PRECISE, Reference
from codewhere.indexer import IndexReport
from codewhere.output import public_meta
from codewhere.store import StoreStats
from codewhere.types import Hit, SymbolRow

if TYPE_CHECKING:
    from codewhere.evaluate import EvalResult

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def shown_path(path: str) -> str:
    """A path for a line of text output: one holding a newline or another control character is
    quoted with escapes (`"a\\nb.py"`), so every hit stays one line."""
    return json.dumps(path, ensure_ascii=False) if _CONTROL.search(path) else path


def print_hits(console: Console, hits: list[Hit]) -> None:
    """grep-like: `path:start-end  score  kind  symbol` (`repo:path:…` from a shared index), then the snippet indented."""
    for hit in hits:
        repo = f"[bold cyan]{escape(hit.repo)}[/]:" if hit.repo else ""
        console.print(
            f"{repo}[bold magenta]{escape(shown_path(hit.path))}[/]:[green]{hit.start_line}-{hit.end_line}[/]"
            f"  [dim]{hit.score:.4f}  {hit.kind.value}[/]" + (f"  {escape(hit.symbol)}" if hit.symbol else ""),
            highlight=False, soft_wrap=True,  # one hit, one line: never folded at 80 columns into a pipe
        )
        for line in hit.snippet.splitlines():
            console.print("    " + escape(line), highlight=False, soft_wrap=True)


# `why`, in words a user reads without the ranking's vocabulary: what found a hit, then what
# raised or lowered it (output.Why's keys)
_FOUND_BY = {"keyword": "matches the question's words", "semantic": "close in meaning",
             "names": "defines a name in the question"}
_SIGNAL_WORDS = {
    "definition": "defines a name in the question", "kind-prior": "a test, docs, config, example or generated file",
    "signature": "the question's words in its name or signature", "path": "the question's words in its file or folder name",
    "size": "a short definition (ten lines or fewer)", "folder": "other good matches in its folder",
    "coherence": "other good matches in its file", "file-words": "its whole file holds the question's words",
}


def _ordinal(n: int) -> str:
    return {1: "best", 2: "second best", 3: "third best"}.get(n, f"{n}th best")


def why_words(why: dict[str, object]) -> list[str]:
    """Why a hit ranked where it did, one phrase per reason: `close in meaning (#2)`,
    `the question's words in its file or folder name: raised ×1.4`."""
    words = []
    for key, value in why.items():
        if key in _FOUND_BY:
            words.append(f"{_FOUND_BY[key]} (#{value})")
        elif key == "evidence" and isinstance(value, list):
            words.append(f"used by {len(value)} matching test{'s' if len(value) != 1 else ''} or doc{'s' if len(value) != 1 else ''}")
        elif key == "function" and isinstance(value, int):
            words.append(f"the {_ordinal(value)} match among its file's definitions")
        elif key == "coherence" and isinstance(value, float) and value < 1:
            words.append("another part of its file ranks higher")
        elif key == "rerank":
            words.append(f"cross-encoder score {value}")
        elif isinstance(value, float):
            words.append(f"{_SIGNAL_WORDS.get(key, key)}: {'raised' if value > 1 else 'lowered'} ×{value:g}")
        else:
            words.append(f"{_SIGNAL_WORDS.get(key, key)}: {value}")
    return words


def status_fields(lines: list[str]) -> list[tuple[str, str]]:
    """status_lines as (label, value) pairs for a panel, without the root (its heading)."""
    pairs = [line.partition(": ") for line in lines]
    return [(label, value) if sep else ("", label) for label, sep, value in pairs if label != "root"]


def report_lines(report: IndexReport, stats: StoreStats) -> list[str]:
    skipped = ", ".join(f"{reason} {n}" for reason, n in sorted(report.skipped.items())) or "none"
    return [
        f"files: {report.files_kept} kept ({report.files_added} added, {report.files_changed} changed, "
        f"{report.files_unchanged} unchanged, {report.files_removed} removed)",
        f"skipped: {sum(report.skipped.values())} ({skipped})",
        f"read: {report.bytes_read:,} bytes; chunks written: {report.chunks_written}; in index: {stats.chunks}; "
        f"vectors embedded: {report.vectors_written}"
        + (f"; taken from another index's work: {report.vectors_reused}" if report.vectors_reused else ""),
        f"time: {report.seconds:.2f} s",
    ] + ([f"{report.texts_truncated} of {report.vectors_written} embedded texts truncated at {report.truncated_at} tokens"]
         if report.truncated_at else []) + [f"graph: {line}" for line in report.precise] + [
        f"  left out: {line}" for line in report.precise_problems[:10]] + (
        [f"  … and {len(report.precise_problems) - 10} more"] if len(report.precise_problems) > 10 else [])


def status_lines(root: Path, index_path: str, stats: StoreStats, repositories: list[str] | None = None,
                 git: GitState | None = None) -> list[str]:
    """A few lines: where, what, with which model, how fresh (`--json` has the same fields)."""
    meta = public_meta(stats.meta)
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(stats.kinds.items()))
    langs = ", ".join(f"{lang or 'other'} {n}" for lang, n in list(stats.languages.items())[:8])
    model = meta.get("model_id") or "none (keyword only)"
    recipe, named, _ = (meta.get("model_fingerprint") or "").partition(":")
    if model == "default" and named:  # which default: its fingerprint starts with its recipe (`code-static-1:…`)
        model += f" ({recipe})"
    vectors = "complete" if meta.get("vectors_complete") else "some chunks still without vectors (the next index run adds them)"
    return [
        f"root: {root}",
        f"index: {index_path} (schema {meta.get('schema_version', '?')}, chunker {meta.get('chunker_version', '?')})",
        *([f"repositories in this database: {', '.join(repositories) or 'none yet'}"] if repositories is not None else []),
        *([git_line(git, stats.meta)] if git is not None else []),
        f"files: {stats.files:,} ({kinds}); {stats.bytes:,} bytes; chunks: {stats.chunks:,}",
        f"languages: {langs}",
        f"model: {model}" + (f", {meta['model_dim']} dimensions; vectors {vectors}" if meta.get("model_dim") else ""),
        *([f"last change: {_when(meta['last_change'])}"] if meta.get("last_change") else []),
    ]


def _when(stamp: str) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(stamp)))
    except ValueError:
        return stamp


def git_line(git: GitState, meta: dict[str, str]) -> str:
    """`git: main at 1a2b3c4d5e6f, tracked files changed (indexed as they are)`."""
    where = f"{git.branch or 'detached HEAD'} at {git.commit[:12] or '(no commit yet)'}"
    indexed = meta.get("git_commit")
    if indexed and indexed != git.commit:
        where += f" (the index last changed on {indexed[:12]})"
    state = {True: ", tracked files changed (indexed as they are)", False: ", clean", None: ""}[git.dirty]
    return f"git: {where}{state}"


def eval_table(result: EvalResult, depth: int) -> Table:
    """The study's table: per question the grep counts and each method's rank, then summaries."""
    scope = f" (scope: {', '.join(result.scope)})" if result.scope else ""
    table = Table(title=f"{result.query_file.name}{scope}: rank of the first relevant chunk (— = not in top {depth})")
    has_grep = any(p is not None or w is not None for p, w in result.grep_counts)
    table.add_column("target", overflow="fold")
    table.add_column("question", overflow="fold", max_width=48)
    if has_grep:
        table.add_column("grep phrase", justify="right")
        table.add_column("grep word", justify="right")
    for method in result.methods:
        table.add_column(method, justify="right")
    published = result.query_file.published_columns
    for column in published:
        table.add_column(f"study {column}", justify="right", style="dim")
    for i, q in enumerate(result.query_file.queries):
        row = [escape(q.label), escape(q.query)]
        if has_grep:
            row += ["" if v is None else str(v) for v in result.grep_counts[i]]
        row += [str(result.scores[m][i].first_rank or "—") for m in result.methods]
        row += [str(q.published.get(c) or "—") for c in published]
        table.add_row(*row)
    summary = result.summary()
    blanks = [""] * (3 if has_grep else 1)
    for label, attr, fmt in (("top 5", "top5", "{}"), ("top 10", "top10", "{}"), ("MRR", "mrr", "{:.3f}"),
                             ("NDCG@10", "ndcg10", "{:.3f}"), ("p50 ms", "p50_ms", "{:.1f}")):
        cells = [fmt.format(getattr(summary[m], attr)) for m in result.methods]
        table.add_row(f"[bold]{label}[/]", *blanks, *cells, *([""] * len(published)))
    return table


# ---- graph answers ---------------------------------------------------------------------------


def symbol_line(s: SymbolRow, indent: int = 0) -> str:
    return f"{'  ' * indent}{shown_path(s.path)}:{s.start_line}-{s.end_line}  {s.kind} {s.qualified_name}  {s.signature}"


def outline_lines(symbols: list[SymbolRow]) -> list[str]:
    depth: dict[str, int] = {}
    out = []
    for s in symbols:
        level = depth.get(s.parent, -1) + 1 if s.parent else 0
        depth[s.qualified_name] = level
        out.append(f"{'  ' * level}{s.start_line}-{s.end_line}  {s.kind} {s.name}  {s.signature}")
    return out


def reference_line(r: Reference, outgoing: bool = False) -> str:
    if outgoing:
        where = (f"{r.target.qualified_name} ({shown_path(r.target.path)}:{r.target.start_line})" if r.target
                 else f"{r.target_name} (no symbol of this repository)" if r.resolution in PRECISE else r.target_name)
        return f"{shown_path(r.path)}:{r.line}  {r.kind} → {where}  [{r.resolution}]"
    who = r.source.qualified_name if r.source else "<module>"
    return f"{shown_path(r.path)}:{r.line}  {r.kind} from {who}  [{r.resolution}]"


def graph_stats_lines(stats: dict[str, Any]) -> list[str]:
    lines = ["symbols: " + ", ".join(f"{k} {n}" for k, n in sorted(stats["symbols"].items()))]
    for language, kinds in sorted(stats["per_language"].items()):
        for kind, levels in sorted(kinds.items()):
            total = sum(levels.values())
            resolved = sum(n for level, n in levels.items() if level not in {"ambiguous", "external", "unresolved"})
            detail = ", ".join(f"{level} {n}" for level, n in sorted(levels.items()))
            lines.append(f"{language or 'other'} {kind}: {total} edges, {resolved / total:.0%} resolved ({detail})")
    return lines
