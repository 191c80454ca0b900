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
    may_match = _term_pattern(wanted).search
    # a term can be one of a line's tokens only if it is a substring of the line folded like
    # this; most lines hold none, and tokenising every line of ten hits was most of the cost
    folded = _fold(text).splitlines()
    if len(folded) != len(body):  # lower() is not always length- and line-preserving
        folded = [_fold(line) for line in body]
    best, best_score = 0, 0
    for i, line in enumerate(body):
        if not may_match(folded[i], 0, SCORED_LINE_CHARS):
            continue
        # the terms found in the folded line bound the score: skip tokenising a line that cannot win
        if sum(map(folded[i][:SCORED_LINE_CHARS].__contains__, wanted)) <= best_score:
            continue
        score = len(wanted & set(index_tokens(line[:SCORED_LINE_CHARS]).split()))
        if score > best_score:
            best, best_score = i, score
            if score == len(wanted):  # no line can do better
                break
    shown = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…" for line in body[best : best + lines]]
    return start_line + best, "\n".join(shown)


def _fold(text: str) -> str:
    return text.lower().replace("_", "").replace("-", "")


@lru_cache(maxsize=256)
def _term_pattern(terms: frozenset[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)) or "(?!)")
