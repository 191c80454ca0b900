"""Identifier-aware tokens, shared by what the index stores and what a query asks.

`should_strip_auth`, `shouldStripAuth` and `ShouldStripAuth` all yield the compound
`shouldstripauth` plus the parts `should strip auth`, so each spelling matches the others and
a plain-language query matches the parts.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+(?:-\w+)*")
# Upper is ASCII A-Z; any other letter counts as lower, so `café` stays whole.
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][^\W\dA-Z_])|[A-Z]?[^\W\dA-Z_]+|[A-Z]+|\d+")
MAX_TOKEN_CHARS = 64  # longer runs are base64, hashes or minified noise
_IDENTIFIER_QUERY = re.compile(r"^[A-Za-z_$][\w$]*(?:(?:::|\.|->|#)[A-Za-z_$][\w$]*)*[!?]?(?:\(\))?$")
_SEPARATORS = re.compile(r"[_\-]+")
_QUALIFIERS = re.compile(r"::|\.|->|#")
_IDENTIFIER_MARK = re.compile(r"::|\.|->|#|_|\(\)")
_CAMEL_MARK = re.compile(r"[a-z][A-Z]|[A-Z][a-z]+[A-Z]")

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing don down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just let me more most my myself no nor not now of off on once only or other our ours ourselves
    out over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours yourself yourselves get gets make makes sure""".split()
)


def split_identifier(word: str) -> list[str]:
    """`HTTPAdapter` → [http, adapter]; `should_strip_auth` → [should, strip, auth]."""
    parts: list[str] = []
    for piece in _SEPARATORS.split(word):
        parts.extend(p.lower() for p in _CAMEL_PART.findall(piece))
    return parts


def compound(word: str) -> str:
    return _SEPARATORS.sub("", word).lower()


def word_tokens(word: str) -> list[str]:
    whole = compound(word)
    if not whole or len(whole) > MAX_TOKEN_CHARS:
        return []
    parts = split_identifier(word)
    if parts == [whole]:
        return [whole]
    return [whole, *parts]


# ASCII bytes that a word of `_WORD` can hold (letters, digits, `_`, `-`), others made spaces: in
# ASCII text, `_WORD`'s matches never span a space, so each space-separated piece holds its own
_WORD_BYTES = bytes(b if chr(b).isalnum() or chr(b) in "_-" else 0x20 for b in range(128)) + b" " * 128
_PIECE_CACHE = 262_144
_piece_token_texts: dict[str, str] = {}  # source code repeats its words endlessly: each tokenized once


def index_tokens(text: str) -> str:
    """Text for the FTS column: every word as its compound followed by its parts."""
    if text.isascii():
        # cutting ASCII at bytes that no word holds takes about 0.4 of `_WORD.findall`'s time,
        # which was three quarters of the time here
        pieces = text.encode("ascii").translate(_WORD_BYTES).decode("ascii").split()
    else:  # `\w` takes letters beyond ASCII: the regular expression decides
        pieces = _WORD.findall(text)
    try:
        return " ".join(filter(None, map(_piece_token_texts.__getitem__, pieces)))
    except KeyError:
        return " ".join(filter(None, map(_piece_tokens, pieces)))


def _piece_tokens(piece: str) -> str:
    """The tokens of a piece of text made of word characters and hyphens (`a--b`, `-1`,
    `well-known`): those of each of its `_WORD` words."""
    known = _piece_token_texts.get(piece)
    if known is None:
        if len(_piece_token_texts) >= _PIECE_CACHE:
            _piece_token_texts.clear()
        words = _WORD.findall(piece)
        known = _piece_token_texts[piece] = " ".join(" ".join(tokens) for w in words if (tokens := word_tokens(w)))
    return known


def query_terms(query: str) -> list[str]:
    """Distinct terms of a query, stop words dropped unless nothing else is left (called once a
    search, by search/query.py)."""
    terms: list[str] = []
    for match in _WORD.finditer(query):
        for token in word_tokens(match.group()):
            if token not in terms:
                terms.append(token)
    content = [t for t in terms if t not in STOP_WORDS and len(t) > 1]
    return content or terms


def is_identifier_query(query: str) -> bool:
    """`raise_for_status`, `Foo::bar`, `getUserById`, `Session.send` — not `redirect` or prose."""
    q = query.strip()
    if not _IDENTIFIER_QUERY.match(q):
        return False
    if _IDENTIFIER_MARK.search(q):
        return True
    return bool(_CAMEL_MARK.search(q))


def last_segment(token: str) -> str:
    """`Sinatra::Helpers` → `Helpers`, `Session.send()` → `send`."""
    return _QUALIFIERS.split(token.strip().strip("`'\"").removesuffix("()"))[-1]


def identifier_name(query: str) -> str:
    """The compound of the last segment of a qualified name: `Session.send()` → `send`."""
    return compound(last_segment(query).rstrip("!?"))


def symbol_fts_row(name: str, qualified_name: str) -> tuple[str, str, str]:
    """What the symbol-name index holds: the compound name, its parts, and the qualified name's parts."""
    qualified = " ".join(p for segment in qualified_name.split(".") for p in split_identifier(segment))
    return compound(name), " ".join(split_identifier(name)), qualified
