"""The ranking parameters follow the model whose vectors answer (search/ranking_sets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewhere.api import Index
from codewhere.embed.fake import FakeEmbedder
from codewhere.embed.registry import DEFAULT_MODEL
from codewhere.search.params import DEFAULT_PARAMS
from codewhere.search.query import parse_query
from codewhere.search.ranking import SIGNALS, fusion_weights
from codewhere.search.ranking_sets import FITTED, NEUTRAL, STATIC, named_set, ranking_set_for

RETRIEVERS = {"keyword", "semantic", "names"}


def test_each_bundled_model_has_its_fitted_set_and_any_other_the_neutral_one() -> None:
    assert ranking_set_for(DEFAULT_MODEL) is STATIC and STATIC.params == DEFAULT_PARAMS and not STATIC.off
    assert ranking_set_for("onnx:minilm") is FITTED["onnx:minilm"]
    assert ranking_set_for("onnx:/some/exported/model") is NEUTRAL
    assert NEUTRAL.off == frozenset(SIGNALS) - {"kind-prior"}  # plain fusion, tests and docs still step back
    assert named_set("neutral") is NEUTRAL
    with pytest.raises(KeyError, match="neutral"):
        named_set("no-such-set")


def test_a_question_in_words_weighs_the_lists_as_the_set_says() -> None:
    prose, name = parse_query("skip the proxy for machines on the local network"), parse_query("should_bypass_proxies")
    tuned = DEFAULT_PARAMS.with_values({"semantic_weight_for_prose": 2.0, "keyword_weight_for_prose": 0.5})
    assert fusion_weights(prose, tuned) == {"keyword": 0.5, "names": 1.0, "semantic": 2.0}
    assert fusion_weights(name, tuned) == fusion_weights(name, DEFAULT_PARAMS)  # identifiers keep theirs


def test_a_model_without_a_fitted_set_ranks_by_plain_fusion(sample_repo: Path) -> None:
    with Index.open(sample_repo, embedder=FakeEmbedder()) as index:
        index.refresh()
        assert index.ranking_set is NEUTRAL
        hits = index.search("charge the credit card", k=10)
        assert hits and all(set(h.why) <= RETRIEVERS | {"kind-prior"} for h in hits)
        index.ranking_override = STATIC  # the static default's set turns the signals back on
        assert any(set(h.why) - RETRIEVERS for h in index.search("charge the credit card", k=10))


def test_search_json_names_the_set_that_ranked(sample_repo: Path, cli) -> None:  # noqa: ANN001
    result = cli("search", "charge the credit card", str(sample_repo), "--json", "-k", "2")
    assert result.code == 0 and result.json()["ranking"] == "default"
