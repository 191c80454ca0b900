"""Read a SCIP index (Sourcegraph's open format, written by scip-python, scip-typescript,
rust-analyzer, scip-java, scip-clang…) into precise answers: each reference's definition.

The bindings (`scip_pb2`) are generated from the published schema (`scip.proto`) at build time.
A SCIP file describes the tree as it was when the indexer ran: each document is checked against
the file on disk now (every definition's range must still hold its name, every reference's range
a name) and a document that fails is reported and left out, never merged blindly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from codewhere import confined
from codewhere.errors import CodewhereError
from codewhere.graph import PreciseAnswer

ROLE_DEFINITION = 1  # scip.SymbolRole.Definition
ENCODING_UTF8, ENCODING_UTF16, ENCODING_UTF32 = 1, 2, 3  # scip.PositionEncoding
STALE_REFERENCES = 0.1  # a document whose references miss their names more often than this is stale

# the last descriptor of a symbol: a method `name(disambiguator).`, a type `name#`, a term `name.`,
# a macro `name!`; names are plain or `backquoted`. Namespaces (`/`), meta (`:`), parameters
# `(name)` and type parameters `[name]` are not definitions the graph has.
_LAST_DESCRIPTOR = re.compile(r"(?:`((?:[^`]|``)+)`|([\w$+\-]+))(?:\([^)]*\)\.|[#.!])$")
_NAME = re.compile(r"[\w$]+")


class ScipError(CodewhereError):
    pass


@dataclass
class ScipReading:
    """What a SCIP file says of the tree, and which of its documents could not be used."""

    tool: str
    documents: int
    answers: list[PreciseAnswer] = field(default_factory=list)
    stale: dict[str, str] = field(default_factory=dict)  # path → why its document was left out
    missing: list[str] = field(default_factory=list)  # documents of files that are not in the index

    def problems(self) -> list[str]:
        """One line per document left out, for the index report."""
        lines = [f"{path}: {why}" for path, why in sorted(self.stale.items())]
        return lines + [f"{path}: not in the index" for path in self.missing]


def descriptor_name(symbol: str) -> str | None:
    """The name a global SCIP symbol defines (`… requests 2.32.3 `src.requests.api`/get().` →
    `get`), or None for a local symbol and for descriptors the graph has no symbol for."""
    if symbol.startswith("local "):
        return None
    m = _LAST_DESCRIPTOR.search(symbol)
    if m is None:
        return None
    name = m.group(1).replace("``", "`") if m.group(1) is not None else m.group(2)
    # scip-typescript marks accessors and constructors: `<get>errors`, `<set>value`, `<constructor>`
    if accessor := re.fullmatch(r"<(\w+)>(.*)", name):
        name = accessor.group(2) or accessor.group(1)
    return name


def _load(path: Path) -> object:
    from codewhere.precise import scip_pb2  # generated at build time from scip.proto

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ScipError(f"no SCIP file at {path}", "give the path of the .scip file an indexer wrote") from None
    except OSError as exc:
        raise ScipError(f"cannot read the SCIP file {path} ({exc.strerror})", "check the path and its permissions") from exc
    index = scip_pb2.Index()  # type: ignore[attr-defined]
    try:
        index.ParseFromString(data)
    except Exception as exc:  # the runtime raises its DecodeError, or others on garbage
        raise ScipError(f"{path} is not a SCIP index ({exc})",
                        "give the file `scip-python index` or `scip-typescript index` wrote (index.scip)") from exc
    if not index.documents and not index.metadata.tool_info.name:
        raise ScipError(f"{path} holds no SCIP documents", "run the SCIP indexer on the repository again")
    return index


def _prefix(project_root: str, root: Path) -> str:
    """Where the SCIP project's root lies inside the indexed folder ("" when they are the same,
    or when the SCIP file was made somewhere else: its documents are then taken as relative to
    the indexed folder)."""
    if not project_root.startswith("file:"):
        return ""
    made_in = Path(unquote(urlsplit(project_root).path))
    try:
        inside = made_in.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return ""
    return "" if str(inside) == "." else inside.as_posix() + "/"


class _Lines:
    """A file's lines, sliced by SCIP's character offsets in the document's position encoding."""

    def __init__(self, text: str, encoding: int) -> None:
        self.lines = text.split("\n")
        self.encoding = encoding

    def slice(self, line: int, start: int, end: int) -> str | None:
        if not 0 <= line < len(self.lines) or end < start:
            return None
        text = self.lines[line]
        if self.encoding == ENCODING_UTF32 or text.isascii():
            return text[start:end] if end <= len(text) else None
        if self.encoding == ENCODING_UTF8:
            raw = text.encode("utf-8")
            return raw[start:end].decode("utf-8", "replace") if end <= len(raw) else None
        wide = text.encode("utf-16-le")  # unspecified: the JavaScript indexers count UTF-16 units
        return wide[2 * start:2 * end].decode("utf-16-le", "replace") if 2 * end <= len(wide) else None


def _span(occurrence_range: Iterable[int]) -> tuple[int, int, int]:
    r = list(occurrence_range)
    if len(r) == 3:
        return r[0], r[1], r[2]
    if len(r) == 4 and r[0] == r[2]:
        return r[0], r[1], r[3]
    return (r[0], 0, -1) if r else (-1, 0, -1)  # a multi-line or empty range names nothing


def read_scip(path: Path, root: Path, indexed: set[str]) -> ScipReading:
    """Every reference in the SCIP file's usable documents, as precise answers over `indexed`
    paths (relative to `root`): its definition's place, or None when the SCIP index defines it
    in no document (a library, the standard library)."""
    index = _load(path)
    meta = index.metadata  # type: ignore[attr-defined]
    reading = ScipReading(f"{meta.tool_info.name} {meta.tool_info.version}".strip(), len(index.documents))  # type: ignore[attr-defined]
    prefix = _prefix(meta.project_root, root)
    usable: list[tuple[str, object, _Lines]] = []
    unusable_symbols: set[str] = set()  # defined in a document left out: their places are unknown
    for document in index.documents:  # type: ignore[attr-defined]
        rel = prefix + document.relative_path
        if rel not in indexed:
            reading.missing.append(rel)
            unusable_symbols.update(o.symbol for o in document.occurrences if o.symbol_roles & ROLE_DEFINITION)
            continue
        try:
            text = confined.read_text(root, rel)
        except OSError as exc:
            reading.stale[rel] = f"unreadable now ({exc.strerror})"
            unusable_symbols.update(o.symbol for o in document.occurrences if o.symbol_roles & ROLE_DEFINITION)
            continue
        lines = _Lines(text, document.position_encoding)
        why = _stale(document, lines)
        if why:
            reading.stale[rel] = why
            unusable_symbols.update(o.symbol for o in document.occurrences if o.symbol_roles & ROLE_DEFINITION)
            continue
        usable.append((rel, document, lines))
    definitions: dict[str, tuple[str, int]] = {}
    for rel, document, _ in usable:
        for o in document.occurrences:  # type: ignore[attr-defined]
            if o.symbol_roles & ROLE_DEFINITION and not o.symbol.startswith("local "):
                definitions.setdefault(o.symbol, (rel, _span(o.range)[0] + 1))
    for rel, document, lines in usable:
        # a local symbol (a nested function, a parameter, a variable) is defined in its own document
        local = {o.symbol: (rel, _span(o.range)[0] + 1) for o in document.occurrences  # type: ignore[attr-defined]
                 if o.symbol_roles & ROLE_DEFINITION and o.symbol.startswith("local ")}
        for o in document.occurrences:  # type: ignore[attr-defined]
            if o.symbol_roles & ROLE_DEFINITION or o.symbol in unusable_symbols:
                continue
            line, start, end = _span(o.range)
            written = lines.slice(line, start, end)
            if not written or not _NAME.fullmatch(written):
                continue  # `super()`, an operator, a string key: no name an edge can carry
            if o.symbol.startswith("local "):
                if o.symbol in local:
                    reading.answers.append(PreciseAnswer(rel, line + 1, written, *local[o.symbol], written))
                continue
            where = definitions.get(o.symbol)
            name = descriptor_name(o.symbol) or ""
            if where is None:
                reading.answers.append(PreciseAnswer(rel, line + 1, written, None))
            else:
                reading.answers.append(PreciseAnswer(rel, line + 1, written, where[0], where[1], name))
    return reading


def _stale(document: object, lines: _Lines) -> str:
    """Why a document no longer describes its file ("" when it still does)."""
    references = missed = 0
    for o in document.occurrences:  # type: ignore[attr-defined]
        if o.symbol.startswith("local "):
            continue
        line, start, end = _span(o.range)
        if end <= start:
            continue
        written = lines.slice(line, start, end)
        if o.symbol_roles & ROLE_DEFINITION:
            name = descriptor_name(o.symbol)
            if name is not None and written != name:
                return f"changed since the SCIP index was made: line {line + 1} no longer defines {name}"
        else:
            references += 1
            missed += written is None or not _NAME.search(written)
    if references and missed > STALE_REFERENCES * references:
        return f"changed since the SCIP index was made: {missed} of {references} references no longer match"
    return ""
