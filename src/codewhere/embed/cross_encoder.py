"""Cross-encoder re-rankers (sentence-transformers `CrossEncoder`, under the `transformers` extra).

A model's load state is cached per process in three states: not tried, ready, failed. A failure
is logged once and never retried in the same process; search then keeps the fused order.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)

MAX_LENGTH = 512  # tokens of query + chunk the cross-encoder reads
INSTALL_HINT = "pip install 'codewhere[transformers]' torch==2.13.0"


class CrossEncoderScorer:
    def __init__(self, name: str) -> None:
        from sentence_transformers import CrossEncoder  # ImportError: the caller records the failure

        folder = Path(name).expanduser()
        self.name = name
        self._model = CrossEncoder(str(folder.resolve()) if folder.is_dir() else name, device="cpu", max_length=MAX_LENGTH)

    def score(self, query: str, texts: Sequence[str]) -> list[float] | None:
        """Scores, or None once the model has failed (then it stays failed in this process)."""
        if self.name in _FAILED:
            return None
        if not texts:
            return []
        try:
            scores = self._model.predict([(query, t) for t in texts], batch_size=16, show_progress_bar=False)
        except Exception as exc:  # noqa: BLE001 — a broken model must not break search
            mark_failed(self.name, f"{type(exc).__name__}: {exc}")
            return None
        return [float(s) for s in scores]


_READY: dict[str, CrossEncoderScorer] = {}
_FAILED: dict[str, str] = {}


def load_reranker(name: str) -> CrossEncoderScorer | None:
    """The re-ranker, loading it on first use; None (and one warning per process) if it can't load."""
    if name in _READY:
        return _READY[name]
    if name in _FAILED:
        return None
    try:
        _READY[name] = CrossEncoderScorer(name)
        return _READY[name]
    except ImportError:
        reason = f"sentence-transformers is not installed ({INSTALL_HINT})"
    except Exception as exc:  # noqa: BLE001 — any load failure means: search without re-ranking
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    mark_failed(name, reason)
    return None


def mark_failed(name: str, reason: str) -> None:
    """Record a failure (at load or at scoring time): warned once, never retried in this process."""
    _READY.pop(name, None)
    if name not in _FAILED:
        _FAILED[name] = reason
        log.warning("re-ranker %s unavailable, keeping the fused order: %s", name, reason)


def load_state(name: str) -> str:
    return "ready" if name in _READY else "failed" if name in _FAILED else "not tried"
