"""Steps 2 and 3 of training the static model on code: the teacher's targets, then the table.

    # step 2, the teacher (resumable: rerun until it says complete; each page of 64 texts is kept)
    CODEWHERE_CACHE_DIR=~/.cache/codewhere-train/index codewhere index ~/.cache/codewhere-train/corpus --yes --quality
    # step 3
    CODEWHERE_CACHE_DIR=~/.cache/codewhere-train/index python scripts/static_training/train.py --out DIR [--lam L ...]

The teacher is the quality tier itself: `onnx:minilm` (int8), each chunk text as the index embeds
it, cut at 128 tokens, its pooled sentence vector, kept in the corpus index's `tier_vectors`
table. This script exports those targets in parts (`targets/part-NN.npz`, their sha256 printed
and compared with teacher-parts.sha256 when that file exists), then fits Tokenlearn's regression:
a text's vector is the mean of its tokens' rows (exactly what StaticEmbedder computes), so with
X the texts' token frequencies (the first 126 wordpieces, what the teacher saw) and Y the
teacher's vectors reduced by PCA to the table's 256 dimensions,

    E = argmin ||X E - Y||^2 + lam ||E - E0 M||^2

where E0 is distill.py's table (minilm-static-1, the default before this one) and M the 256x256
map that best sends its text vectors to Y (so a token the corpus never shows keeps its meaning,
mapped into the new space). Solved by conjugate gradients on the normal equations, one system for
all 256 columns, for each ridge weight `lam` (relative to X'X's mean diagonal); the held-out tenth
of the texts gives each one's cosine to the teacher (the training curve). Every point of the path
is written as a candidate — `mapped/` (lam infinite: E0 M alone) and `lam-L/` — and step 4
(compare.py) chooses on the dev split: the held-out cosine prefers a small lam (0.917 against the
map's 0.836), the benchmarks do not (BENCHMARKS.md §2). Seeded and deterministic; numpy and scipy
(scripts/static_training/requirements.txt).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from scipy import sparse
from tokenizers import Tokenizer

from codewhere.embed.registry import build_default_model
from codewhere.store.sqlite import SqliteStore
from codewhere.tier import TIER_MAX_TOKENS

HERE = Path(__file__).resolve().parent
PARTS_RECORD = HERE / "teacher-parts.sha256"
TOKENS_SEEN = TIER_MAX_TOKENS - 2  # the teacher's window less [CLS] and [SEP]
PART_ROWS = 10_000
DIMS = 256
SEED = 20261207
RECIPE = "code-static-1"


def export_targets(index: Path, cache: Path, partial: bool) -> tuple[list[str], np.ndarray]:
    """The teacher's (text, vector) pairs, written once as parts and read back from them; with
    `partial`, whatever the teacher has embedded so far, read from the index and not kept."""
    if partial:
        texts, vectors = SqliteStore.open(index).tier_texts_embedded()
        return texts, vectors.astype(np.float32)
    folder = cache / "targets"
    if not (folder / "done").exists():
        store = SqliteStore.open(index)
        texts, vectors = store.tier_texts_embedded()
        coverage = store.tier_coverage()
        if coverage[0] < coverage[1]:
            raise SystemExit(f"train: the teacher has embedded {coverage[0]:,} of {coverage[1]:,} texts; rerun step 2 first")
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for part, start in enumerate(range(0, len(texts), PART_ROWS)):
            np.savez(folder / f"part-{part:02d}.npz", texts=np.array(texts[start:start + PART_ROWS], dtype=object),
                     vectors=vectors[start:start + PART_ROWS])
        (folder / "done").write_text("")
    sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("part-*.npz"))}
    listing = "".join(f"{digest}  {name}\n" for name, digest in sums.items())
    if PARTS_RECORD.exists() and PARTS_RECORD.read_text() != listing:
        print("train: the teacher's parts differ from teacher-parts.sha256 (another machine's onnxruntime, "
              "or another corpus)", file=sys.stderr)
    PARTS_RECORD.write_text(listing)
    texts_out: list[str] = []
    parts = []
    for name in sums:
        with np.load(folder / name, allow_pickle=True) as data:
            texts_out += [str(t) for t in data["texts"]]
            parts.append(data["vectors"].astype(np.float32))
    return texts_out, np.concatenate(parts)


def token_matrix(texts: list[str], tokenizer: Tokenizer, vocabulary: int) -> sparse.csr_matrix:
    """Row i: the frequency of each token among text i's first TOKENS_SEEN wordpieces."""
    tokenizer.no_padding()
    tokenizer.no_truncation()
    rows, cols = [], []
    for start in range(0, len(texts), 2048):
        for row, encoding in enumerate(tokenizer.encode_batch_fast(texts[start:start + 2048], add_special_tokens=False),
                                       start):
            ids = encoding.ids[:TOKENS_SEEN]
            rows += [row] * len(ids)
            cols += ids
    data = np.ones(len(rows), np.float32)
    counts = sparse.csr_matrix((data, (np.array(rows), np.array(cols))), shape=(len(texts), vocabulary))
    counts.sum_duplicates()
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    lengths[lengths == 0] = 1
    return sparse.diags(1.0 / lengths).astype(np.float32) @ counts


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-9)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-9)
    return float((a * b).sum(axis=1).mean())


def solve(x: sparse.csr_matrix, y: np.ndarray, prior: np.ndarray, lam: float, iterations: int,
          check: tuple[sparse.csr_matrix, np.ndarray] | None = None) -> tuple[np.ndarray, list[tuple[int, float]]]:
    """Conjugate gradients on (X'X + lam I) E = X'Y + lam prior, every column at once."""
    xt = x.T.tocsr()

    def apply(v: np.ndarray) -> np.ndarray:
        return xt @ (x @ v) + lam * v

    table = prior.copy()
    residual = xt @ y + lam * prior - apply(table)
    direction = residual.copy()
    energy = (residual * residual).sum(axis=0)
    curve = []
    for step in range(1, iterations + 1):
        pushed = apply(direction)
        alpha = energy / np.maximum((direction * pushed).sum(axis=0), 1e-30)
        table += alpha * direction
        residual -= alpha * pushed
        fresh = (residual * residual).sum(axis=0)
        direction = residual + (fresh / np.maximum(energy, 1e-30)) * direction
        energy = fresh
        if check is not None and step % 10 == 0:
            curve.append((step, cosine(check[0] @ table, check[1])))
            print(f"  lam {lam:g} step {step}: held-out cosine {curve[-1][1]:.4f}", file=sys.stderr)
    return table, curve


def write_model(folder: Path, table: np.ndarray, source: Path, details: dict[str, object]) -> None:
    from safetensors.numpy import load_file, save_file

    folder.mkdir(parents=True, exist_ok=True)
    stored = table.astype(np.float16)
    save_file({"embeddings": stored}, str(folder / "model.safetensors"))
    shutil.copyfile(source / "tokenizer.json", folder / "tokenizer.json")
    base = json.loads((source / "config.json").read_text())
    base_table = load_file(str(source / "model.safetensors"))["embeddings"]
    config = dict(base)
    config.update({
        "recipe": RECIPE, "hidden_dim": int(table.shape[1]),
        # the fingerprint an index records: this table's own sha256 (a retrain is another model)
        "source_fingerprint": hashlib.sha256(stored.tobytes()).hexdigest(),
        "base": {"recipe": base.get("recipe"), "source_fingerprint": base.get("source_fingerprint"),
                 "table_sha256": hashlib.sha256(np.ascontiguousarray(base_table).tobytes()).hexdigest()},
        "trained": details,
    })
    (folder / "config.json").write_text(json.dumps(config, indent=4) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "codewhere-train")
    parser.add_argument("--index", type=Path, help="the corpus index (default: the one under CACHE/index)")
    parser.add_argument("--out", type=Path, required=True,
                        help="write the candidates here: mapped/ (the linear map alone) and lam-L/ per ridge weight")
    parser.add_argument("--lam", type=float, action="append", help="ridge weights to try (relative to X'X's mean diagonal)")
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--partial", action="store_true", help="train on what the teacher has done so far (a trial)")
    args = parser.parse_args()
    index = args.index or next(iter(sorted((args.cache / "index" / "indexes").glob("corpus-*.sqlite"))), None)
    if index is None:
        raise SystemExit("train: no corpus index; run steps 1 and 2 first")
    started = time.monotonic()
    texts, targets = export_targets(index, args.cache, args.partial)
    print(f"targets: {len(texts):,} texts x {targets.shape[1]} ({time.monotonic() - started:.0f} s)", file=sys.stderr)

    source = build_default_model(args.cache / "models")  # distill.py's model, the base (built once, ~50 s)
    from safetensors.numpy import load_file

    base = load_file(str(source / "model.safetensors"))["embeddings"].astype(np.float32)
    x = token_matrix(texts, Tokenizer.from_file(str(source / "tokenizer.json")), base.shape[0])
    held = np.random.default_rng(SEED).random(len(texts)) < 0.1
    x_fit, x_held = x[~held], x[held]
    mean = targets[~held].mean(axis=0)
    _, _, components = np.linalg.svd(targets[~held] - mean, full_matrices=False)
    projection = components[:DIMS].T
    y_fit, y_held = (targets[~held] - mean) @ projection, (targets[held] - mean) @ projection
    print(f"tokens: {x.nnz:,} nonzeros; PCA keeps {DIMS} of {targets.shape[1]} ({time.monotonic() - started:.0f} s)",
          file=sys.stderr)

    mapping, *_ = np.linalg.lstsq(x_fit @ base, y_fit, rcond=None)
    prior = base @ mapping
    baseline = {"today's table, unmapped": cosine(x_held @ base, y_held), "today's table, mapped": cosine(x_held @ prior, y_held)}
    print(f"held-out cosine: {baseline}", file=sys.stderr)
    scale = float(np.asarray(x_fit.multiply(x_fit).sum(axis=0)).ravel().mean())
    results: dict[str, object] = {"baseline": baseline, "texts": len(texts), "held_out": int(held.sum()),
                                  "lam_scale": scale}
    # every point of the path is a candidate; compare.py chooses among them on the dev split
    write_model(args.out / "mapped", prior, source, {"lam": "infinite (the linear map alone)", **results})
    for relative in args.lam or [0.01, 1.0, 10.0]:
        table, curve = solve(x_fit, y_fit, prior, relative * scale, args.iterations, (x_held, y_held))
        results[f"lam {relative:g}"] = curve
        write_model(args.out / f"lam-{relative:g}", table, source, {"lam": relative, "curve": curve, **results})
    results["seconds"] = round(time.monotonic() - started)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
