"""The few lines of a chunk worth showing: around the first line that matches the query."""

from __future__ import annotations

import re
from functools import lru_cache

from codewhere.tokens import index_tokens

MAX_LINE_CHARS = 200
SCORED_LINE_CHARS = 2000  # a longer line (minified code) is scored on its start
# where str.splitlines breaks a line besides "\n": a text holding one takes the general path
_OTHER_BREAKS = "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def snippet(text: str, start_line: int, terms: tuple[str, ...], lines: int = 3) -> tuple[int, str]:
    """(first line number shown, text) — `lines` lines starting at the best-matching line: the
    line holding the most query terms among its tokens, the first of those tied."""
    if any(mark in text for mark in _OTHER_BREAKS):
        body = text.splitlines()
        best = _best_line(body, frozenset(terms), _bounds_by_line(body, frozenset(terms)))
    else:
        body = text.split("\n")
        best = _best_line(body, frozenset(terms), _bounds(_fold(text), frozenset(terms)))
        if text.endswith("\n"):
            body.pop()  # as splitlines: no empty line after the last break
    shown = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…" for line in body[best : best + lines]]
    return start_line + best, "\n".join(shown)


def _bounds(folded: str, wanted: frozenset[str]) -> dict[int, int]:
    """Line number → how many terms are substrings of the line's scored start, for lines with
    any: a term can be one of a line's tokens only if it is a substring of the line folded like
    this, and most lines hold none. Each term is looked for with str.find, from line to line (a
    regular expression of all terms costs several times more a match)."""
    bound: dict[int, int] = {}
    for term in wanted:
        row, counted = 0, 0  # line `row` starts at position `counted`
        at = folded.find(term)
        while at >= 0:
            begins = folded.rfind("\n", 0, at) + 1
            row += folded.count("\n", counted, begins)
            counted = begins
            if at + len(term) - begins <= SCORED_LINE_CHARS:
                bound[row] = bound.get(row, 0) + 1
            end = folded.find("\n", at)
            if end < 0:
                break
            at = folded.find(term, end + 1)
    return bound


def _bounds_by_line(body: list[str], wanted: frozenset[str]) -> dict[int, int]:
    """`_bounds` for a text with other line breaks than "\\n", line by line."""
    pattern = _term_pattern(wanted)
    bound: dict[int, int] = {}
    for row, line in enumerate(body):
        folded = _fold(line)
        if pattern.search(folded) and (held := sum(map(folded[:SCORED_LINE_CHARS].__contains__, wanted))):
            bound[row] = held
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


@lru_cache(maxsize=256)
def _term_pattern(terms: frozenset[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)) or "(?!)")
