"""Signal `size`: a chunk of a few lines steps back; BM25's length normalisation and the
signature signal favour a three-line getter that happens to hold two of the query's words."""

from __future__ import annotations

from codewhere.search.params import RankingParams
from codewhere.search.query import Query
from codewhere.types import ChunkRow


def size_factor(c: ChunkRow, query: Query, p: RankingParams) -> float:
    return p.small_chunk_penalty if c.end_line - c.start_line < p.small_chunk_lines else 1.0
