"""The few lines of a chunk worth showing: around the first line that matches the query."""

from __future__ import annotations

import re
from functools import lru_cache

from codewhere.tokens import index_tokens

MAX_LINE_CHARS = 200
SCORED_LINE_CHARS = 2000  # a longer line (minified code) is scored on its start


def snippet(text: str, start_line: int, terms: tuple[str, ...], lines: int = 3) -> tuple[int, str]:
    """(first line number shown, text) — `lines` lines starting at the best-matching line."""
    body = text.splitlines()
    wanted = frozenset(terms)
    # a term can be one of a line's tokens only if it is a substring of the line folded like
    # this; most lines hold none, and tokenising every line of ten hits was most of the cost
    folded = _fold(text).splitlines()
    if len(folded) != len(body):  # lower() is not always length- and line-preserving
        folded = [_fold(line) for line in body]
    joined = "\n".join(folded)
    # the terms' pattern, searched from line to line, finds the lines worth scoring; the terms
    # each holds (as a substring of its folded, scored start) bound its score from above
    bounded: list[tuple[int, int]] = []
    search = _term_pattern(wanted).search
    row, at = 0, 0  # line `row` starts at position `at` of `joined`
    while found := search(joined, at):
        start = found.start()
        row += joined.count("\n", at, start)
        bound = sum(map(folded[row][:SCORED_LINE_CHARS].__contains__, wanted))
        if bound:
            bounded.append((-bound, row))
        at = joined.find("\n", start) + 1  # on to the next line
        if not at:
            break
        row += 1
    # tokenise the most promising lines first, and only those that can still win or tie earlier
    bounded.sort()
    best, best_score = 0, 0
    for negative, row in bounded:
        if -negative < best_score or (-negative == best_score and row > best):
            break
        score = len(wanted & set(index_tokens(body[row][:SCORED_LINE_CHARS]).split()))
        if score > best_score or (score == best_score and score and row < best):
            best, best_score = row, score
            if score == len(wanted):  # no line can do better, and none before it ties
                break
    shown = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…" for line in body[best : best + lines]]
    return start_line + best, "\n".join(shown)


def _fold(text: str) -> str:
    return text.lower().replace("_", "").replace("-", "")


@lru_cache(maxsize=256)
def _term_pattern(terms: frozenset[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)) or "(?!)")
