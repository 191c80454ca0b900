"""The few lines of a chunk worth showing: around the first line that matches the query."""

from __future__ import annotations

from codewhere.tokens import index_tokens, query_terms

MAX_LINE_CHARS = 200


def snippet(text: str, start_line: int, query: str, lines: int = 3) -> tuple[int, str]:
    """(first line number shown, text) — `lines` lines starting at the best-matching line."""
    body = text.splitlines()
    terms = set(query_terms(query))
    best, best_score = 0, 0
    for i, line in enumerate(body):
        score = len(terms & set(index_tokens(line[:2000]).split()))
        if score > best_score:
            best, best_score = i, score
    shown = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…" for line in body[best : best + lines]]
    return start_line + best, "\n".join(shown)
