"""Any OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, Ollama, vLLM, LM Studio, TEI …):
`openai:MODEL` with the base URL and the name of the env var holding the API key in config."""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from codewhere.embed.base import normalise_rows
from codewhere.embed.conventions import convention_for
from codewhere.errors import ModelError
from codewhere.types import ModelInfo

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RemoteConfig:
    base_url: str = "http://localhost:11434/v1"  # Ollama's OpenAI-compatible API
    api_key_env: str | None = None  # the NAME of the env var that holds the key, never the key
    batch_size: int = 64
    timeout_seconds: float = 60.0
    retries: int = 5
    backoff_seconds: float = 1.0  # doubled each retry, with jitter; a Retry-After header wins


class RemoteEmbedder:
    def __init__(self, model: str, config: RemoteConfig) -> None:
        self.model = model
        self.config = config
        self.endpoint = config.base_url.rstrip("/") + "/embeddings"
        self.convention = convention_for(model)
        self._key = None
        if config.api_key_env:
            self._key = os.environ.get(config.api_key_env)
            if not self._key:
                raise ModelError(f"the API key variable {config.api_key_env} is not set", f"export {config.api_key_env}=…")
        self.requests_sent = 0
        self._dim: int | None = None  # learnt from the first answer; every later one must match it
        dim = self._post(["dimension probe"]).shape[1]
        self._dim = int(dim)
        self._info = ModelInfo(f"openai:{model}", int(dim), f"openai:{config.base_url.rstrip('/')}:{model}")

    @property
    def info(self) -> ModelInfo:
        return self._info

    def _post(self, texts: list[str]) -> np.ndarray:
        body = json.dumps({"model": self.model, "input": texts}).encode()
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        delay = self.config.backoff_seconds
        for attempt in range(self.config.retries + 1):
            request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
            self.requests_sent += 1
            try:
                with urllib.request.urlopen(request, timeout=self.config.timeout_seconds) as response:
                    payload = json.loads(response.read())
                break
            except urllib.error.HTTPError as exc:
                if exc.code in (401, 403):
                    raise ModelError(
                        f"{self.endpoint} refused the API key (HTTP {exc.code})",
                        f"check the key in {self.config.api_key_env or 'the api_key_env setting'}",
                    ) from exc
                if exc.code not in RETRY_STATUSES or attempt == self.config.retries:
                    raise ModelError(f"{self.endpoint} answered HTTP {exc.code} for model {self.model!r}",
                                     "check the model name and the endpoint's logs") from exc
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                wait = float(retry_after) if retry_after and retry_after.replace(".", "", 1).isdigit() else delay
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                if attempt == self.config.retries:
                    raise ModelError(f"cannot reach {self.endpoint}: {getattr(exc, 'reason', exc)}",
                                     "check the base_url setting and that the server runs") from exc
                wait = delay
            time.sleep(wait * (1 + 0.1 * random.random()))
            delay *= 2
        try:
            rows = sorted(payload["data"], key=lambda item: item["index"])
            vectors = np.asarray([row["embedding"] for row in rows], np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{self.endpoint} did not answer in the OpenAI embeddings format", "check base_url") from exc
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise ModelError(f"{self.endpoint} returned {len(vectors)} vectors for {len(texts)} texts", "check the server")
        if self._dim is not None and vectors.shape[1] != self._dim:
            raise ModelError(
                f"{self.endpoint} returned {vectors.shape[1]}-dimensional vectors, not {self._dim}",
                "the server changed models; run `codewhere index --rebuild`",
            )
        return normalise_rows(vectors)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._info.dim), np.float32)
        prefixed = [self.convention.document_prefix + t for t in texts]
        size = self.config.batch_size
        return np.concatenate([self._post(prefixed[i : i + size]) for i in range(0, len(prefixed), size)])

    def embed_query(self, text: str) -> np.ndarray:
        return self._post([self.convention.query_prefix + text])[0]
