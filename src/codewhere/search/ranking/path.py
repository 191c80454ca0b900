"""Signal `path`: query words in the file's path (its name and folder) point at the file, more so
when they make up the whole file name (`mime.rb` for "MIME type detection"); an identifier points
at the file or folder named after it."""

from __future__ import annotations

from functools import lru_cache

from codewhere.search.params import RankingParams
from codewhere.search.query import Query
from codewhere.search.ranking.definition import defines_queried
from codewhere.search.ranking.words import file_name_words, named_after, path_words
from codewhere.types import ChunkRow


def path_factor(c: ChunkRow, query: Query, p: RankingParams) -> float:
    if query.name_like and query.names:
        # a typed name points at the file or folder named after it (`join_set.rs` for `JoinSet`); a
        # file sharing only a part of it (`curl_trc.c` for `curl_msnprintf`) counts for its definer
        # alone (`retry.py` for `retry_with_backoff`), word by whole word
        if named_after(c.path, query.names):
            return 1 + p.path_weight
        if not defines_queried(c, query):
            return 1.0
        prefix_min, whole_name = 0, False
    else:
        prefix_min, whole_name = p.path_prefix_min, not query.name_like
    if not query.path_terms:
        return 1.0
    matches, named = _path_words(c.path, query.path_terms, p.path_folders, prefix_min, whole_name)
    factor = 1 + p.path_weight * matches / len(query.path_terms)
    # a file named for the asked-about thing (`mime.rb` for "MIME type detection") beats a file that
    # shares the word among others (`mime_utils.rb`) or a big file that mentions it
    return factor * (1 + p.path_name_boost) if named else factor


@lru_cache(maxsize=65_536)
def _path_words(path: str, terms: frozenset[str], folders: int, prefix_min: int, whole_name: bool) -> tuple[int, bool]:
    """(how many `terms` the path holds, whether they make up its whole file name): one cached
    call per candidate. Every parameter it reads is an argument, so two parameter sets in one
    process are never served each other's answers."""
    return path_matches(path, terms, folders, prefix_min), whole_name and named_in(path, terms, prefix_min)


def path_matches(path: str, terms: frozenset[str], folders: int, prefix_min: int) -> int:
    """How many of the query's stems the path's words hold, exactly or (semble's rule) as a
    prefix either way: `lockfile` finds `lock.lua`, `config` finds `configuration.py`;
    `prefix_min` 0: exactly only."""
    words = path_words(path, folders)
    exact = terms & words
    if not prefix_min:
        return len(exact)
    return len(exact) + sum(1 for t in terms - exact if any(_prefixed(t, w, prefix_min) for w in words))


def _prefixed(a: str, b: str, prefix_min: int) -> bool:
    return min(len(a), len(b)) >= prefix_min and (a.startswith(b) or b.startswith(a))


def named_in(path: str, terms: frozenset[str], prefix_min: int) -> bool:
    """Every word of the file name is one of `terms`, exactly or as the path rule's prefix."""
    words = file_name_words(path)
    return bool(words) and all(w in terms or any(_prefixed(w, t, prefix_min) for t in terms) for w in words)
