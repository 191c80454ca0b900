"""The few lines of a chunk worth showing: around the first line that matches the query."""

from __future__ import annotations

from codewhere.tokens import index_tokens

MAX_LINE_CHARS = 200
SCORED_LINE_CHARS = 2000  # a longer line (minified code) is scored on its start
# where str.splitlines breaks a line besides "\n": a text holding one takes the general path
_OTHER_BREAKS = "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def snippet(text: str, start_line: int, terms: tuple[str, ...], lines: int = 3) -> tuple[int, str]:
    """(first line number shown, text) — `lines` lines starting at the best-matching line: the
    line holding the most query terms among its tokens, the first of those tied."""
    wanted = frozenset(terms)
    if any(mark in text for mark in _OTHER_BREAKS):
        body = text.splitlines()
        folded = [_fold(line) for line in body]  # lower() is not always length- and line-preserving
        whole = "\n".join(folded)
    else:  # str.split is several times faster than splitlines, and one fold serves every line
        body = text.split("\n")
        whole = _fold(text)
        folded = whole.split("\n")
        if text.endswith("\n"):  # as splitlines: no empty line after the last break
            body.pop()
            folded.pop()
    best = _best_line(body, wanted, _bounds(whole, folded, wanted))
    shown = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…" for line in body[best : best + lines]]
    return start_line + best, "\n".join(shown)


def _bounds(whole: str, folded: list[str], wanted: frozenset[str]) -> dict[int, int]:
    """Line number → how many terms are substrings of the line's scored start (folded), for
    lines with any: a term can be one of a line's tokens only if it is such a substring, and
    most lines hold none. Only the terms the whole text holds are looked for line by line."""
    if len(whole) > SCORED_LINE_CHARS:
        folded = [line[:SCORED_LINE_CHARS] for line in folded]
    bound: dict[int, int] = {}
    for term in wanted:
        if term in whole:
            for row, line in enumerate(folded):
                if term in line:
                    bound[row] = bound.get(row, 0) + 1
    return bound


def _best_line(body: list[str], wanted: frozenset[str], bound: dict[int, int]) -> int:
    """The first line with the most terms among its tokens; the most promising lines are
    tokenised first, and only those that can still win or tie earlier."""
    best, best_score = 0, 0
    for row, most in sorted(bound.items(), key=lambda item: (-item[1], item[0])):
        if most < best_score or (most == best_score and row > best):
            break
        score = len(wanted & set(index_tokens(body[row][:SCORED_LINE_CHARS]).split()))
        if score > best_score or (score == best_score and score and row < best):
            best, best_score = row, score
            if score == len(wanted):  # no line can do better, and none before it ties
                break
    return best


def _fold(text: str) -> str:
    return text.lower().replace("_", "").replace("-", "")
