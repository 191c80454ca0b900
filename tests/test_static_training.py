"""The static model's training recipe (scripts/static_training/), on problems small enough to check."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "static_training"))

import packages  # noqa: E402
import train  # noqa: E402
from scipy import sparse  # noqa: E402


def test_the_corpus_holds_no_benchmark_repository_and_pins_every_package() -> None:
    names = [p.name.rsplit("/", 1)[-1].lower() for p in packages.PACKAGES]
    assert not set(names) & packages.EXCLUDED
    assert len(set(names)) == len(names)
    assert all(p.source in ("pypi", "npm", "deb", "debsrc") and p.version and p.languages for p in packages.PACKAGES)
    lock = Path(packages.__file__).with_name("corpus-lock.json").read_text()
    assert all(f"{p.source}:{p.name}=={p.version}" in lock for p in packages.PACKAGES)  # a sha256 for each


def test_the_ridge_solve_recovers_a_table_the_texts_determine() -> None:
    rng = np.random.default_rng(0)
    vocabulary, texts, dims = 40, 400, 8
    truth = rng.normal(size=(vocabulary, dims)).astype(np.float32)
    counts = sparse.random(texts, vocabulary, density=0.2, random_state=1, dtype=np.float32, format="csr")
    counts.data[:] = 1.0
    lengths = np.maximum(np.asarray(counts.sum(axis=1)).ravel(), 1)
    x = sparse.diags(1.0 / lengths).astype(np.float32) @ counts
    y = x @ truth
    table, curve = train.solve(x, y, np.zeros_like(truth), lam=1e-6, iterations=60, check=(x, y))
    assert train.cosine(x @ table, y) > 0.999
    assert [step for step, _ in curve] == [10, 20, 30, 40, 50, 60] and curve[-1][1] > 0.999  # the training curve
    # a strong ridge keeps the prior for what the texts say little about
    prior = rng.normal(size=truth.shape).astype(np.float32)
    held, _ = train.solve(x, y, prior, lam=1e3, iterations=60)
    assert np.allclose(held, prior, atol=0.05)


def test_a_texts_row_is_its_first_tokens_frequencies() -> None:
    from tokenizers import Tokenizer

    from codewhere.embed.registry import shipped_model_folder

    folder = shipped_model_folder()
    assert folder is not None
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    # the teacher saw the first TOKENS_SEEN wordpieces: a word past them is not in the row
    long_text = "alpha " * train.TOKENS_SEEN + "beta " * 50
    x = train.token_matrix(["def parse_config(path):", long_text, ""], tokenizer, tokenizer.get_vocab_size())
    sums = np.asarray(x.sum(axis=1)).ravel()
    assert np.allclose(sums[:2], 1.0) and sums[2] == 0
    vocab = tokenizer.get_vocab()
    assert x[1, vocab["alpha"]] == pytest.approx(1.0) and x[1, vocab["beta"]] == 0
