"""Parse one file with tree-sitter into symbols (definitions) and edges (calls, imports, bases)."""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

import numpy as np

from codewhere.parse.grammars import (
    CALLABLE_KINDS,
    CONTAINER_KINDS,
    GRAMMARS,
    SCOPE_ONLY_KINDS,
)
from codewhere.types import Edge, EdgeKind, Symbol

log = logging.getLogger(__name__)

QUERIES = Path(__file__).with_name("queries")
MAX_SIGNATURE = 300
# Definitions nested deeper than this are not symbols of their own (their lines stay in the
# enclosing one's): each symbol's qualified name holds every enclosing name, so a file of n nested
# functions (generated code, a parser's fuzz fixture) cost O(n²) in names and their tokens —
# 3,000 nested JavaScript functions took 9 s, 30,000 ran out of time at 1 GB.
MAX_NESTING = 24
# tree-sitter's query matcher is quadratic in the depth of unclosed brackets (20,000 lines of `[`
# took 0.3 s in every grammar tried, 100,000 took 7.5 s; no hand-written code nests past a few
# dozen). A file nested deeper is skipped rather than stall the index. (A progress callback that
# cancels the matcher would bound it by time, but tree-sitter 0.26.1 crashes calling one on a
# deeply nested Rust file.)
MAX_BRACKET_DEPTH = 1_000
_BRACKET_STEP = np.zeros(256, np.int8)
_BRACKET_STEP[list(b"([{")] = 1
_BRACKET_STEP[list(b")]}")] = -1


# Some grammars' error recovery is quadratic on some text (bash: 6,000 lines of `def f(a):` took
# 6 s to parse); a parse is stopped after this long and its file skipped.
PARSE_SECONDS = 2.0
READ_BYTES = 16_384  # the slice handed to the parser at a time
PARSE_MEMORY = 128 << 20  # ... or this much more memory (a comment opener repeated 7,000 times: 250 MB in 2 s)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _resident_memory() -> int:
    """The process's resident memory now, in bytes: /proc/self/statm where there is one. Not
    ru_maxrss: a process started by fork and exec keeps its parent's peak there (pytest's 784 MB),
    which hid a parse's growth from the budget. Elsewhere the peak is the best there is."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        if resource is None:
            return 0
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)


class ParseBudgetExceeded(Exception):
    """A file too deeply nested, or too slow to parse, to parse in bounded time."""


def bracket_depth(data: bytes) -> int:
    """How deep brackets nest in `data`, counted as the parser meets them: a closer with nothing
    open lowers the floor rather than the depth (text in strings and comments counts too)."""
    if not data:
        return 0
    levels = np.cumsum(_BRACKET_STEP[np.frombuffer(data, np.uint8)], dtype=np.int32)
    floor = np.minimum(np.minimum.accumulate(levels), 0)
    return int((levels - floor).max())
MAX_DOC = 400


@dataclass(frozen=True)
class ParseResult:
    symbols: tuple[Symbol, ...]
    edges: tuple[Edge, ...]


def has_grammar(language: str) -> bool:
    return language in GRAMMARS


@cache
def _tools(language: str):  # noqa: ANN202 — (Parser, Query), built once per language per process
    from tree_sitter import Language, Parser, Query

    grammar = GRAMMARS[language]
    module = importlib.import_module(grammar.module)
    lang = Language(getattr(module, grammar.function)())
    query = Query(lang, (QUERIES / grammar.query).read_text(encoding="utf-8"))
    return Parser(lang), query


@dataclass
class _Def:
    node: object
    kind: str
    name: str
    start: int  # byte offsets, for containment
    end: int
    owner: str = ""  # Go methods: the receiver type
    qualified: str = ""
    parent: _Def | None = None
    depth: int = 0  # enclosing definitions


def _text(node) -> str:  # noqa: ANN001
    return node.text.decode("utf-8", errors="replace")


def parse(language: str, source: str) -> ParseResult | None:
    """Symbols and edges of `source`, or None when the language has no grammar or it fails."""
    if language not in GRAMMARS:
        return None
    data = source.encode("utf-8", errors="surrogatepass")
    if (depth := bracket_depth(data)) > MAX_BRACKET_DEPTH:
        raise ParseBudgetExceeded(f"brackets nested {depth:,} deep")
    try:
        from tree_sitter import QueryCursor

        parser, query = _tools(language)
        deadline = time.monotonic() + PARSE_SECONDS
        memory_ceiling = _resident_memory() + PARSE_MEMORY
        stopped = False
        parsing = True

        def read(offset: int, _point: object) -> bytes:
            # tree-sitter has no time or memory limit of its own here; it asks for the text as it
            # goes, and an empty answer is the end of the file, so a parse past its budget ends.
            # Only the parse: a node's text is read through here too, and an empty answer there
            # had tree-sitter ask again forever (an indexer hung on a 529 KB test file whose
            # symbols were still being read when the budget ran out on a loaded machine)
            nonlocal stopped
            if parsing and (time.monotonic() > deadline or _resident_memory() > memory_ceiling):
                stopped = True
                return b""
            return data[offset : offset + READ_BYTES]

        tree = parser.parse(read)
        parsing = False
        if stopped:
            raise ParseBudgetExceeded(f"parsing took over {PARSE_SECONDS:.0f} s or {PARSE_MEMORY >> 20} MB")
        matches = QueryCursor(query).matches(tree.root_node)
    except ParseBudgetExceeded:
        raise
    except Exception as exc:  # a grammar that fails on one file must not stop the run
        log.warning("tree-sitter could not parse a %s file: %s", language, exc)
        return None
    defs: list[_Def] = []
    refs: list[tuple[EdgeKind, object, str]] = []
    for _, captures in matches:
        names = captures.get("name")
        for capture, nodes in captures.items():
            if capture.startswith("def."):
                node = nodes[0]
                name = _text(names[0]) if names else _default_name(node)
                owner = _text(captures["receiver"][0]) if "receiver" in captures else ""
                defs.append(_Def(node, capture[4:], name, node.start_byte, node.end_byte, owner))
        for capture, edge_kind, target in (("call", EdgeKind.CALL, "callee"), ("import", EdgeKind.IMPORT, "imported"), ("inherit", EdgeKind.INHERIT, "base")):
            if capture in captures and target in captures:
                for target_node in captures[target]:
                    refs.append((edge_kind, captures[capture][0], _clean_target(_text(target_node))))
    symbols = _symbols(defs, language)
    edges = _edges(refs, defs)
    return ParseResult(tuple(symbols), tuple(edges))


def _default_name(node) -> str:  # noqa: ANN001
    return {"init_declaration": "init"}.get(node.type, node.type)


_TARGET_SEPARATORS = re.compile(r"::|/|\\\\|\.(?=[A-Za-z_])|->")
_COMMENT_LINE = re.compile(r"\s*(#|//)")
_SPACES = re.compile(r"\s+")


def _clean_target(text: str) -> str:
    """`"net/http"` → `http`; `<stdio.h>` → `stdio.h`; `foo::bar` → `bar`."""
    text = text.strip().strip("\"'<>`")
    return _TARGET_SEPARATORS.split(text)[-1] if "/" in text or "::" in text or "->" in text else text


def _link_parents(defs: list[_Def]) -> list[_Def]:
    """Sort by position and give each definition its innermost enclosing one."""
    unique: dict[tuple[int, int, str], _Def] = {}
    for d in defs:
        unique.setdefault((d.start, d.end, d.name), d)
    ordered = sorted(unique.values(), key=lambda d: (d.start, -d.end))
    stack: list[_Def] = []
    for d in ordered:
        while stack and not (stack[-1].start <= d.start and d.end <= stack[-1].end):
            stack.pop()
        d.parent = stack[-1] if stack else None
        stack.append(d)
    return ordered


def _symbols(defs: list[_Def], language: str) -> list[Symbol]:
    out: list[Symbol] = []
    for d in _link_parents(defs):
        kind = d.kind
        parent = d.parent
        owner = d.owner or (parent.name if parent else "")
        in_container = bool(d.owner or (parent and parent.kind in CONTAINER_KINDS and parent.kind != "module"))
        if kind == "function" and in_container:
            kind = "method"
        elif kind == "method" and not in_container:  # Ruby's top-level `def`, C# local functions
            kind = "function"
        d.depth = parent.depth + 1 if parent else 0
        if d.depth >= MAX_NESTING:
            d.qualified = parent.qualified if parent else d.name  # its own nested ones stop here too
            continue
        prefix = parent.qualified if parent else ""
        if d.owner:
            prefix = f"{prefix}.{d.owner}" if prefix else d.owner
        d.qualified = f"{prefix}.{d.name}" if prefix else d.name
        d.kind = kind
        if kind in SCOPE_ONLY_KINDS:
            continue
        node: Any = d.node  # a tree_sitter.Node; only parse/ imports tree-sitter, lazily
        outer = node.parent if node.parent is not None and node.parent.type == "decorated_definition" else node
        decorators = tuple(_text(c).strip() for c in outer.children if c.type == "decorator") if outer is not node else ()
        out.append(Symbol(
            name=d.name,
            qualified_name=d.qualified,
            kind=kind,
            start_line=outer.start_point[0] + 1,
            end_line=node.end_point[0] + 1,
            signature=_signature(node),
            doc=_doc(node, outer, language),
            decorators=decorators,
            parent=_scope_name(parent) if parent else (owner if d.owner else ""),
        ))
    return out


def _scope_name(parent: _Def) -> str:
    return parent.qualified


def _signature(node) -> str:  # noqa: ANN001
    """The definition's text up to its body, on one line."""
    body = node.child_by_field_name("body")
    end = body.start_byte if body is not None else node.end_byte
    head = node.text[: end - node.start_byte].decode("utf-8", errors="replace")
    if body is None:
        head = head.split("\n", 1)[0]
    head = "\n".join(line for line in head.split("\n") if not _COMMENT_LINE.match(line))
    head = _SPACES.sub(" ", head).strip().rstrip("{:").strip()
    return head[:MAX_SIGNATURE]


def _doc(node, outer, language: str) -> str:  # noqa: ANN001
    """A Python docstring, else the comment block right above the definition."""
    if language == "python":
        body = node.child_by_field_name("body")
        if body is not None and body.named_child_count:
            first = body.named_children[0]
            if first.type == "expression_statement" and first.named_child_count and first.named_children[0].type == "string":
                return _text(first.named_children[0]).strip("\"' \n")[:MAX_DOC]
    lines: list[str] = []
    sibling = outer.prev_named_sibling
    expected_row = outer.start_point[0] - 1
    while sibling is not None and "comment" in sibling.type and sibling.end_point[0] == expected_row:
        lines.insert(0, _text(sibling))
        expected_row = sibling.start_point[0] - 1
        sibling = sibling.prev_named_sibling
    text = "\n".join(lines)
    text = re.sub(r"^\s*(/\*+|\*+/|\*|//+|#+|--)\s?", "", text, flags=re.MULTILINE)
    return text.strip()[:MAX_DOC]


def _same(a, b) -> bool:  # noqa: ANN001 — query matches hand out fresh wrappers for the same node
    return (a.start_byte, a.end_byte, a.type) == (b.start_byte, b.end_byte, b.type)


def _edges(refs: list[tuple[EdgeKind, object, str]], defs: list[_Def]) -> list[Edge]:
    """Attach each reference to its enclosing symbol with one sweep over positions (files with
    thousands of calls and definitions stay linear)."""
    symbols = sorted((d for d in defs if d.kind not in SCOPE_ONLY_KINDS), key=lambda d: (d.start, -d.end))
    out: dict[tuple[EdgeKind, str, str, int], None] = {}
    ordered_refs = sorted((r for r in refs if r[2]), key=lambda r: r[1].start_byte)  # type: ignore[attr-defined]
    stack: list[_Def] = []
    i = 0
    for kind, node, target in ordered_refs:
        start = node.start_byte  # type: ignore[attr-defined]
        line = node.start_point[0] + 1  # type: ignore[attr-defined]
        if kind is EdgeKind.INHERIT:
            own = [d for d in defs if _same(d.node, node)]
            if own:  # the base is captured on the class (or impl) itself
                out[(kind, own[0].qualified, target, line)] = None
                continue
        while i < len(symbols) and symbols[i].start <= start:
            while stack and stack[-1].end <= symbols[i].start:
                stack.pop()
            stack.append(symbols[i])
            i += 1
        while stack and stack[-1].end <= start:
            stack.pop()
        enclosing = [d for d in stack if d.start <= start < d.end and not _same(d.node, node)]
        if kind is EdgeKind.CALL:
            enclosing = [d for d in enclosing if d.kind in CALLABLE_KINDS] or enclosing
        source = enclosing[-1].qualified if enclosing else ""
        out[(kind, source, target, line)] = None
    return [Edge(kind, source, target, line) for kind, source, target, line in out]
