"""Signal `definition`: the chunk that defines a queried name outranks chunks that use it, more
so in a file named after it (`SqlMapper.cs` over the partial `SqlMapper.CacheInfo.cs`); a name
typed with a leading capital counts only where it is defined spelled so (`Sinatra::Helpers` is
`module Helpers`, not `def helpers`)."""

from __future__ import annotations

from codewhere.search.params import RankingParams
from codewhere.search.query import Query
from codewhere.search.ranking.words import file_named_after
from codewhere.types import ChunkRow


def defines_queried(c: ChunkRow, query: Query) -> bool:
    """The chunk defines a name the query asks for (compound: `raise_for_status` = `RaiseForStatus`)."""
    return not query.names.isdisjoint(c.defines)


def definition_factor(c: ChunkRow, query: Query, p: RankingParams) -> float:
    if not defines_queried(c, query):
        return 1.0
    boost = p.definition_boost
    if query.capitalised and query.capitalised.isdisjoint(c.spelled):
        boost *= p.misspelled_definition_share
    if file_named_after(c.path, query.names):
        return (1 + boost) * (1 + p.definition_file_boost)
    return 1 + boost
