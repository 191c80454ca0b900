"""What an agent receives for a search: small enough to afford, enough code to trust the hit.

An MCP answer was a median 2,650 tokens (chars/4) on the requests study's questions, a fifth of it
code: two-space indentation, a `why` breakdown on every hit, the location three times, and the
same answer again as structured content. Here a hit is its location, symbol, score and a snippet:
the definition's first line, then the best-matching lines, each with its line number, up to a
line budget; the whole answer fits a token budget and says what it left out.

Tokens are counted as characters / 4: no maintained tokenizer for the models agents run can be
installed offline (tiktoken downloads its tables at run time), and on these answers chars/4
stays within the ratio code tokenizers give for source text (3.5-4.5 characters a token).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from codewhere.redact import redact
from codewhere.types import FileKind, Hit

CHARS_PER_TOKEN = 4
DEFAULT_LINES = 10  # snippet lines a hit shows (semble shows up to 10)
GAP = "…"


def compact(answer: object) -> str:
    """JSON without the spaces an indented dump spends (a fifth of an answer's characters)."""
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":"))


def tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def snippet(hit: Hit, file_lines: Sequence[str] | None, max_lines: int) -> str:
    """The definition's first line (its signature), then the hit's matched lines, numbered, at
    most `max_lines` lines; a gap between them is one `…` line."""
    if max_lines <= 0:
        return ""
    shown: list[tuple[int, str]] = []
    matched = hit.snippet.split("\n") if hit.snippet else []
    first_matched = hit.snippet_line or hit.start_line
    if file_lines is not None and hit.symbol and first_matched > hit.start_line:
        head = _signature_line(hit, file_lines)
        if head is not None:
            shown.append(head)
    room = max_lines - len(shown)
    shown += [(first_matched + i, line) for i, line in enumerate(matched[:room])]
    out: list[str] = []
    previous = None
    for number, text in shown:
        if previous is not None and number > previous + 1:
            out.append(GAP)
        out.append(f"{number} {text.rstrip()}")
        previous = number
    return "\n".join(out)


def _signature_line(hit: Hit, file_lines: Sequence[str]) -> tuple[int, str] | None:
    """The first line of the definition that names it (past decorators and a doc comment above)."""
    name = hit.symbol.rsplit(".", 1)[-1]
    for number in range(hit.start_line, min(hit.end_line, hit.start_line + 30) + 1):
        if number - 1 < len(file_lines) and name in file_lines[number - 1]:
            return number, file_lines[number - 1]
    return None


def hit_entry(hit: Hit, code: str, explain: bool) -> dict[str, object]:
    entry: dict[str, object] = {"location": f"{hit.repo + ':' if hit.repo else ''}{hit.path}:{hit.start_line}-{hit.end_line}"}
    if hit.symbol:
        entry["symbol"] = hit.symbol
    if hit.kind is not FileKind.CODE:
        entry["kind"] = hit.kind.value  # code is the default: said only when it is not
    entry["score"] = round(hit.score, 4)
    if code:
        entry["snippet"] = code
    if explain:
        entry["why"] = hit.why
    return entry


def search_answer(hits: Sequence[Hit], read_lines: Callable[[str], Sequence[str] | None], max_lines: int,
                  max_tokens: int, explain: bool, redact_secrets: bool) -> dict[str, object]:
    """The answer: hits in rank order until the token budget is spent; snippets are cut to fewer
    lines before a hit is dropped. `dropped` and `trimmed` say what was left out."""
    files: dict[str, Sequence[str] | None] = {}

    def lines_of(path: str) -> Sequence[str] | None:
        if path not in files:
            files[path] = read_lines(path)
        return files[path]

    def entries(lines: int) -> list[dict[str, object]]:
        out = []
        for hit in hits:
            code = snippet(hit, lines_of(hit.path), lines) if lines else ""
            out.append(hit_entry(hit, redact(code) if redact_secrets else code, explain))
        return out

    for lines in dict.fromkeys((max_lines, min(max_lines, 4), min(max_lines, 1), 0)):
        shown = entries(lines)
        if tokens(compact({"hits": shown})) <= max_tokens:
            answer: dict[str, object] = {"hits": shown}
            if lines < max_lines:
                answer["trimmed"] = f"snippets cut to {lines} lines to fit max_tokens={max_tokens}"
            return answer
    kept: list[dict[str, object]] = []
    for entry in shown:
        if tokens(compact({"hits": [*kept, entry]})) > max_tokens:
            break
        kept.append(entry)
    return {"hits": kept, "trimmed": f"locations only, {len(hits) - len(kept)} hits dropped to fit max_tokens={max_tokens}"}
