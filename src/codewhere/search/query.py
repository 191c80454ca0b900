"""A query, parsed once: its terms, the names it asks for, and what it asks about.

`Index.search` makes one `Query` and passes it down; nothing below reads the raw text again
(except the embedder and the re-ranker, which take it whole).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from codewhere.tokens import compound, identifier_name, is_identifier_query, last_segment, query_terms

TEST_WORDS = frozenset({"test", "tests", "testing", "spec", "specs", "fixture", "fixtures", "mock", "mocks"})
# "documentation" is left out on purpose: "documentation generation" asks for the code that generates it
DOCS_WORDS = frozenset({"readme", "guide", "tutorial", "changelog", "docs"})
TRANSLATION_WORDS = frozenset({"translation", "translations", "translated", "locale", "locales", "gettext", "i18n", "l10n", "catalog"})


@dataclass(frozen=True)
class Query:
    """Everything search reads of what was typed, worked out once: retrievers, signals and
    snippets take this, never the text."""

    text: str  # as typed: the vector query and the re-ranker read it whole
    terms: tuple[str, ...]  # BM25's terms: each word's compound and its parts, stop words dropped
    names: frozenset[str]  # compound names the query asks for (`raise_for_status`, `Router`)
    name_like: bool  # one identifier, or a single word of three characters or more: names lead
    wants_tests: bool
    wants_docs: bool
    term_set: frozenset[str] = frozenset()  # the terms, for the signature signal
    path_terms: frozenset[str] = frozenset()  # stems of the longer terms, for the path signal
    capitalised: frozenset[str] = frozenset()  # the names typed with a leading capital, as typed (`Helpers`)
    identifier: str | None = None  # the whole query is one identifier: the compound of its last segment
    wants_translations: bool = False  # asks about translations ("locale", "gettext"): catalogs keep their place


def parse_query(text: str) -> Query:
    terms = tuple(query_terms(text))
    words = [w.lower() for w in _WORD.findall(text)]
    alone = len(words) == 1
    whole_identifier = is_identifier_query(text)
    name_like = whole_identifier or (len(text.split()) == 1 and len(text.strip()) > 2)
    typed = [last_segment(tok) for tok in text.split() if _looks_like_code(tok, alone)]  # as typed: `Helpers`
    names = {compound(tok) for tok in _NAME_SEPARATORS.split(text) if tok and _looks_like_code(tok, alone)}
    names |= {compound(name) for name in typed}
    word_set = set(words)
    return Query(
        text, terms, frozenset(n for n in names if n), name_like,
        not TEST_WORDS.isdisjoint(word_set), not DOCS_WORDS.isdisjoint(word_set),
        frozenset(terms), frozenset(stem(t) for t in terms if len(t) > 2),
        frozenset(n for n in typed if _CAPITALISED_NAME.fullmatch(n)),
        identifier_name(text) if whole_identifier else None,
        not TRANSLATION_WORDS.isdisjoint(word_set),
    )


_WORD = re.compile(r"\w+")
_NAME_SEPARATORS = re.compile(r"[\s,;]+")
_CODE_TOKEN = re.compile(r"[A-Za-z_$][\w$.:#>-]*(\(\))?")
_CODE_MARK = re.compile(r"_|[a-z][A-Z]|::|\.\w|\(\)|^[A-Z][a-z]+[A-Z]")
# a leading capital is deliberate (a type, not the function or variable of the same letters); later
# ones only separate words: `parseHeaders` may be typed for `parse_headers`
_CAPITALISED_NAME = re.compile(r"[A-Z][\w$]*")


def _looks_like_code(token: str, alone: bool) -> bool:
    token = token.strip("`'\"")
    if not _CODE_TOKEN.fullmatch(token):
        return False
    return alone or bool(_CODE_MARK.search(token))


_SUFFIXES = ("ing", "ers", "ies", "ed", "es", "er", "s")


def stem(word: str) -> str:
    """A crude English stem, enough to match `websocket`/`websockets`, `spawned`/`spawn`."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word
