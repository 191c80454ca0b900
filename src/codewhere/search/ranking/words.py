"""The words of paths and lines that several signals compare with a query's, cached by text."""

from __future__ import annotations

import re
from functools import lru_cache

from codewhere.search.query import stem
from codewhere.tokens import compound, split_identifier


def file_name(path: str) -> str:
    """The file name without its extension: `src/SqlMapper.cs` → `SqlMapper`."""
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def folder_of(path: str) -> str:
    return path.rpartition("/")[0]


@lru_cache(maxsize=65_536)
def file_stem(path: str) -> str:
    """`src/SqlMapper.cs` → `sqlmapper`, `lib/rack/mock_request.rb` → `mockrequest`."""
    return compound(file_name(path))


def file_named_after(path: str, names: frozenset[str]) -> bool:
    stem_ = file_stem(path)
    return stem_ in names or stem_.removesuffix("s") in names


@lru_cache(maxsize=65_536)
def named_after(path: str, names: frozenset[str]) -> bool:
    """The file (`SqlMapper.cs`, `requests.rb` for `request`) or its folder is named after one of `names`."""
    return file_named_after(path, names) or compound(folder_of(path).rpartition("/")[2]) in names


@lru_cache(maxsize=65_536)
def path_words(path: str, folders: int = 0) -> frozenset[str]:
    """Stemmed words of the file name (without its extension) and of its last `folders`
    folders (0: all of them)."""
    trimmed = path.rsplit(".", 1)[0]
    if folders:
        trimmed = "/".join(trimmed.split("/")[-1 - folders :])
    parts = re.split(r"[/._-]", trimmed)
    return frozenset(stem(p) for part in parts for p in (part.lower(), *split_identifier(part)) if p)


@lru_cache(maxsize=65_536)
def file_name_words(path: str) -> tuple[str, ...]:
    """Stemmed words of the file name without its extension: `HttpRedirect.kt` → (http, redirect)."""
    pieces = [piece for piece in re.split(r"[._-]", file_name(path)) if piece]
    return tuple(stem(word) for piece in pieces for word in (split_identifier(piece) or [piece.lower()]))


@lru_cache(maxsize=65_536)
def line_words(line: str) -> frozenset[str]:
    return frozenset(t for w in re.findall(r"\w+", line) for t in (compound(w), *split_identifier(w)))


def head(text: str, lines: int) -> str:
    """The text up to the end of its `lines`-th line, without its newline (and without copying
    the rest of a long text)."""
    end = -1
    for _ in range(lines):
        end = text.find("\n", end + 1)
        if end < 0:
            return text
    return text[:end]
