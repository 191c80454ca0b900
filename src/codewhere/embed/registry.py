"""Turn a model name into an Embedder: the built-in default, a local folder, or a Hugging Face id."""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from codewhere.config import Settings
from codewhere.embed import distill
from codewhere.embed.base import Embedder
from codewhere.embed.static import load_folder, load_hub
from codewhere.errors import ModelError
from codewhere.locks import FileLock

log = logging.getLogger(__name__)

DEFAULT_MODEL = "default"
BuildProgress = Callable[[int, int], None]


def shipped_model_folder() -> Path | None:
    """The default model as the package ships it (built by distill.py's recipe, checked by
    `codewhere model build`); None in a tree without it (then it is built once, on first use)."""
    folder = Path(str(resources.files("codewhere"))) / "models" / distill.RECIPE_VERSION
    return folder if (folder / "model.safetensors").is_file() else None


def built_model_folder(models_dir: Path) -> Path:
    return models_dir / distill.RECIPE_VERSION


def ensure_default_model(models_dir: Path, progress: BuildProgress | None = None) -> Path:
    """The default model's folder: the shipped one, else one built once per models dir."""
    return shipped_model_folder() or build_default_model(models_dir, progress)


def build_default_model(models_dir: Path, progress: BuildProgress | None = None) -> Path:
    """Build the default model once per models dir from the weights package; concurrent first
    runs build it once."""
    folder = built_model_folder(models_dir)
    if (folder / "model.safetensors").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(folder.with_name(folder.name + ".lock"), wait_seconds=600, what="the default model build"):
        if not (folder / "model.safetensors").exists():
            log.warning("building the default embedding model from all-MiniLM-L6-v2 — once, about 50 s, offline")
            distill.build_static_model(folder, progress)
    return folder


def known_model_id(name: str) -> str | None:
    """The id the model `name` will have once loaded, when that is known without loading it
    (the default model); None for the others."""
    return DEFAULT_MODEL if name == DEFAULT_MODEL else None


def load_embedder(name: str, settings: Settings, progress: BuildProgress | None = None) -> Embedder:
    """`default`; `onnx:minilm` or `onnx:FOLDER`; `st:ID-or-FOLDER` (sentence-transformers);
    `openai:MODEL` (an OpenAI-compatible endpoint); else a model2vec folder or Hugging Face id."""
    if name == DEFAULT_MODEL:
        return load_folder(ensure_default_model(settings.model_cache, progress), DEFAULT_MODEL)
    provider, _, rest = name.partition(":")
    if provider == "onnx" and rest:
        from codewhere.embed.onnx import load_onnx

        return load_onnx(rest, settings.max_seq_length)
    if provider == "st" and rest:
        from codewhere.embed.transformer import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(rest, settings.max_seq_length)
    if provider == "openai" and rest:
        from codewhere.embed.remote import RemoteConfig, RemoteEmbedder

        return RemoteEmbedder(rest, RemoteConfig(
            settings.embed_base_url, settings.embed_api_key_env, settings.embed_batch_size, settings.embed_timeout_seconds,
        ))
    path = Path(name).expanduser()
    if path.is_dir():
        return load_folder(path, str(path.resolve()))
    if path.exists() or name.startswith((".", "/", "~")):
        raise ModelError(f"model folder {name} not found or not a folder", "pass a model2vec folder or a Hugging Face id")
    return load_hub(name)
