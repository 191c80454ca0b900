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
from codewhere.types import ModelInfo

log = logging.getLogger(__name__)

DEFAULT_MODEL = "default"
# The default model the package ships: distill.py's static model trained on code against MiniLM
# (scripts/static_training). It keeps the id `default`; its fingerprint names its recipe.
DEFAULT_RECIPE = "code-static-1"
# The default before it, and the base it is trained from: distill.py's recipe, built offline from
# the weights package. An index built with it keeps answering with it (`--model minilm-static-1`).
PREVIOUS_DEFAULT = distill.RECIPE_VERSION
BuildProgress = Callable[[int, int], None]


def shipped_model_folder() -> Path | None:
    """The default model as the package ships it; None in a tree without it."""
    folder = Path(str(resources.files("codewhere"))) / "models" / DEFAULT_RECIPE
    return folder if (folder / "model.safetensors").is_file() else None


def built_model_folder(models_dir: Path) -> Path:
    """Where `codewhere model build` puts distill.py's model (the previous default)."""
    return models_dir / distill.RECIPE_VERSION


def ensure_default_model(models_dir: Path, progress: BuildProgress | None = None) -> Path:
    """The default model's folder (the shipped one)."""
    folder = shipped_model_folder()
    if folder is None:
        raise ModelError(f"this installation lacks its default model (codewhere/models/{DEFAULT_RECIPE})",
                         "reinstall codewhere (`pip install --force-reinstall codewhere`), or pass --model minilm-static-1")
    return folder


def is_previous_default(info: ModelInfo) -> bool:
    """Whether an index's recorded model is the default this package shipped before."""
    return info.id == DEFAULT_MODEL and (info.fingerprint or "").startswith(f"{PREVIOUS_DEFAULT}:")


def build_default_model(models_dir: Path, progress: BuildProgress | None = None) -> Path:
    """Build distill.py's model (the previous default, the trained default's base) once per
    models dir from the weights package; concurrent first runs build it once."""
    folder = built_model_folder(models_dir)
    if (folder / "model.safetensors").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(folder.with_name(folder.name + ".lock"), wait_seconds=600, what="the default model build"):
        if not (folder / "model.safetensors").exists():
            log.warning("building %s from all-MiniLM-L6-v2 — once, about 50 s, offline", distill.RECIPE_VERSION)
            distill.build_static_model(folder, progress)
    return folder


def known_model_id(name: str) -> str | None:
    """The id the model `name` will have once loaded, when that is known without loading it
    (the default model, and the previous one, which keeps its id); None for the others."""
    return DEFAULT_MODEL if name in (DEFAULT_MODEL, PREVIOUS_DEFAULT) else None


def load_embedder(name: str, settings: Settings, progress: BuildProgress | None = None) -> Embedder:
    """`default`; `onnx:minilm` or `onnx:FOLDER`; `st:ID-or-FOLDER` (sentence-transformers);
    `openai:MODEL` (an OpenAI-compatible endpoint); else a model2vec folder or Hugging Face id."""
    if name == DEFAULT_MODEL:
        return load_folder(ensure_default_model(settings.model_cache, progress), DEFAULT_MODEL)
    if name == PREVIOUS_DEFAULT:  # the same id as the default: an index built with it accepts it
        return load_folder(build_default_model(settings.model_cache, progress), DEFAULT_MODEL)
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
