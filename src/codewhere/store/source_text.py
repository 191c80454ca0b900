"""Chunk texts a compact index does not keep: cut again from the files they came from.

A chunk's text is a slice of its file's text (whole lines, or a piece of a long line). Past
QUANTIZE_FROM vectors the SQLite index keeps where each slice starts and how long it is instead
of the text (the kernel: 0.40 GB of compressed text), and reads the file when a search needs the
chunk: only when the file still holds the bytes the index was built from (its digest), so a
text is the one that was indexed or none."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from codewhere.scan import file_digest, read_source


class SourceTexts:
    """Reads slices of a folder's files, each file once a call."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def file_text(self, path: str, digest: str | None) -> str | None:
        """The file's text when its bytes still have `digest`; None when it changed or is gone."""
        source = read_source(self.root, path)
        if isinstance(source, tuple) and digest is not None and file_digest(source[0]) == digest:
            return source[1]
        return None

    def slices(self, wanted: Sequence[tuple[str, str | None, int, int]]) -> list[str | None]:
        """The text of each (path, file digest, start, length); None where the file changed."""
        texts: dict[str, str | None] = {}
        out: list[str | None] = []
        for path, digest, at, length in wanted:
            if path not in texts:
                texts[path] = self.file_text(path, digest)
            text = texts[path]
            out.append(None if text is None else text[at : at + length])
        return out
