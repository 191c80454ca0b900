"""codewhere: local-first code search by meaning and by name.

`from codewhere import Index` (and `SearchRequest`, `Hit`) is the public Python API; see
`codewhere.api.Index`. They are imported on first use, so `codewhere --version` stays quick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Hit", "Index", "SearchRequest", "__version__"]

if TYPE_CHECKING:
    from codewhere.api import Index, SearchRequest
    from codewhere.types import Hit


def __getattr__(name: str) -> Any:
    if name in ("Index", "SearchRequest"):
        from codewhere import api

        return getattr(api, name)
    if name == "Hit":
        from codewhere.types import Hit

        return Hit
    raise AttributeError(f"module 'codewhere' has no attribute {name!r}")
