"""Embedders: one protocol, several providers. Only this package imports model libraries."""

from codewhere.embed.base import Embedder, ModelInfo

__all__ = ["Embedder", "ModelInfo"]
