"""Which ranking a query gets: the parameter set fitted for the model whose vectors answer it.

A ranking's numbers are fitted against one model's vectors: how far to trust its list against
BM25's, how much a file's other chunks should lift one. Fitted on the static default, they took
back most of what MiniLM's better vectors found (issue 50), so each bundled model has its own set,
fitted on the development split at both levels (benchmarks/fit_signals.py); a model without one
gets NEUTRAL: plain fusion of the keyword, vector and name lists, with only the test and docs
handling (`kind-prior`), which no list knows about. `--json`, the web API and MCP `explain`
name the set that ranked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codewhere.search.params import DEFAULT_PARAMS, RankingParams
from codewhere.search.ranking import SIGNALS


@dataclass(frozen=True)
class RankingSet:
    name: str  # the model it was fitted for, "neutral", or the TOML file it was read from
    params: RankingParams
    off: frozenset[str] = field(default=frozenset())  # signals this set leaves out, whatever the caller asks


STATIC = RankingSet("default", DEFAULT_PARAMS)  # the static default's: search/params.py's defaults
# MiniLM's vectors order a file's functions well where the static ones did not: a file's chunks are
# weighed by their vector rank too (`function_semantic_weight`). Fitted on 20 repositories of the
# dev split (the 7 largest left out: their MiniLM index takes hours here) at both levels: semble's
# NDCG@10 0.8955 -> 0.8959, function MRR@10 on their 216 commit questions 0.369 -> 0.390, top 5
# 0.477 -> 0.509; on 15 reported repositories NDCG 0.8929 -> 0.8942, the function level within
# the noise (BENCHMARKS.md §15). No other constant moved either level past the noise without
# costing the other.
MINILM = RankingSet("onnx:minilm", DEFAULT_PARAMS.with_values({"function_semantic_weight": 4.0}))
NEUTRAL = RankingSet("neutral", DEFAULT_PARAMS, frozenset(SIGNALS) - {"kind-prior"})

FITTED: dict[str, RankingSet] = {STATIC.name: STATIC, MINILM.name: MINILM}


def ranking_set_for(model_id: str) -> RankingSet:
    """The set fitted for `model_id` (an index's model id: `default`, `onnx:minilm`), else NEUTRAL."""
    return FITTED.get(model_id, NEUTRAL)


def named_set(name: str) -> RankingSet:
    """A set by its name (`neutral` or a model's), for benchmarks that rank one model's vectors
    with another's set."""
    known = {NEUTRAL.name: NEUTRAL, **FITTED}
    if name not in known:
        raise KeyError(f"no ranking set {name!r}; known: {', '.join(sorted(known))}")
    return known[name]
