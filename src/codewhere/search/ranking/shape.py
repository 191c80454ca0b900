"""Signal `query-shape`: how much each retriever's list weighs in the fusion, by what was typed."""

from __future__ import annotations

from codewhere.search.params import RankingParams
from codewhere.search.query import Query


def fusion_weights(query: Query, p: RankingParams) -> dict[str, float]:
    """Identifiers lean on keyword and name lists; a question in words on the lists its model's
    set weighs (the static default's: balanced)."""
    if query.name_like:
        return {"keyword": 1.0, "names": p.names_weight_for_identifiers, "semantic": p.semantic_weight_for_identifiers}
    return {"keyword": p.keyword_weight_for_prose, "names": 1.0, "semantic": p.semantic_weight_for_prose}
