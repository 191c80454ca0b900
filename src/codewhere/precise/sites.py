"""Where an edge's name is written, for asking a tool about that exact place."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from codewhere.types import EdgeSite

EDGE_KINDS = ("call", "inherit", "import")


@dataclass
class PassRun:
    """What one precise pass did."""

    files: int = 0
    sites: int = 0  # edges asked about
    answered: int = 0  # of those, edges a definition was found for
    seconds: float = 0.0
    failed: str = ""  # why the pass stopped early (a server that crashed or hung), "" when it did not


def name_column(line_text: str, name: str) -> int | None:
    """The 0-based column of `name` on its line: a call `name(` first, else the bare word."""
    for pattern in (rf"(?<![\w$]){re.escape(name)}\s*\(", rf"(?<![\w$]){re.escape(name)}(?![\w$])"):
        m = re.search(pattern, line_text)
        if m:
            return m.start()
    return None


def sites_by_file(sites: Iterable[EdgeSite], suffixes: tuple[str, ...]) -> dict[str, list[EdgeSite]]:
    """The edges of files ending in `suffixes` that a precise source can answer, by file."""
    grouped: dict[str, list[EdgeSite]] = defaultdict(list)
    for site in sites:
        if site.path.endswith(suffixes) and site.kind in EDGE_KINDS:
            grouped[site.path].append(site)
    return dict(grouped)
