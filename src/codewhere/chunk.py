"""Cut a file's text into chunks, each carrying its own 1-based inclusive line range."""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from codewhere.tokens import compound
from codewhere.types import Chunk, FileKind, FileRecord, Symbol, Unit

CHUNKER_VERSION = "3"  # bump when embedding texts change: every vector is made again
# bump when the cut or what is recorded beside the text changes (defined names, mentions, file
# kinds): an index rewrites its files at its next refresh and keeps the vectors of unchanged texts
RECORDS_VERSION = 7  # 7: a symbol's chunks record their definition (Unit); 6: lines over LONG_LINE_CHARS are cut
CHARS_PER_TOKEN = 4
TARGET_TOKENS = 700
OVERLAP_TOKENS = 80


def content_hash(text: str, recipe: str = "window") -> str:
    """Keys a chunk's vector: its text and how its embedding text is made, not its path, so a
    renamed file keeps its vectors and a changed recipe (CHUNKER_VERSION) re-embeds."""
    key = f"{CHUNKER_VERSION}\0{recipe}\0{text}"
    return hashlib.blake2b(key.encode("utf-8", errors="surrogatepass"), digest_size=16).hexdigest()


def split_lines(text: str) -> list[str]:
    """Lines as editors number them: only `\n` ends a line (str.splitlines also cuts at \f, \x1c, ...)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


LONG_LINE_CHARS = TARGET_TOKENS * CHARS_PER_TOKEN  # a longer line is cut into pieces of this size


def _line_pieces(lines: list[str], limit: int) -> tuple[list[str], list[int]]:
    """The lines, each longer than `limit` cut into pieces of at most `limit` characters, and the
    0-based line each piece comes from. Without this, every symbol chunk of a minified file
    stored its whole one line: a 200 KB line made 3,408 chunks and a 1.1 GB index (BENCHMARKS §9)."""
    if all(len(line) <= limit for line in lines):
        return lines, list(range(len(lines)))
    pieces: list[str] = []
    owners: list[int] = []
    for number, line in enumerate(lines):
        for at in range(0, max(len(line), 1), limit):
            pieces.append(line[at : at + limit])
            owners.append(number)
    return pieces, owners


def line_windows(
    text: str,
    target_chars: int = TARGET_TOKENS * CHARS_PER_TOKEN,
    overlap_chars: int = OVERLAP_TOKENS * CHARS_PER_TOKEN,
) -> Iterator[tuple[int, int, str]]:
    """(start, end, text) windows of whole lines, the published recipe.

    Lines are added until the window reaches `target_chars` (the last line may overshoot); the
    next window steps back over whole lines until it shares at least `overlap_chars`. A window
    holds at least one line and the next starts at least one line later, so the loop always
    ends. On requests v2.32.3 this gives the study's 318. A line longer than LONG_LINE_CHARS (or
    `target_chars`) is cut into pieces that count as lines here, so each window stores its own
    slice: stored text stays linear in the input whatever the line lengths.
    """
    lines, owners = _line_pieces(split_lines(text), max(target_chars, LONG_LINE_CHARS))
    n = len(lines)
    start = 0
    while start < n:
        end, size = start, 0
        while end < n and size < target_chars:
            size += len(lines[end])
            end += 1
        body = "".join(lines[start:end])
        if body.strip():
            yield owners[start] + 1, owners[end - 1] + 1, body
        if end >= n:
            break
        back, overlap = end, 0
        while back > start + 1 and overlap < overlap_chars:
            overlap += len(lines[back - 1])
            back -= 1
        start = back


def embed_text_for(path: str, body: str) -> str:
    """The path leads: it carries meaning (`auth.py`, `redirects`) the body may not repeat."""
    return f"{path}\n{body}"


def chunk_file(record: FileRecord, text: str, definitions: list[tuple[int, str]] | None = None) -> list[Chunk]:
    """Line windows (the study's recipe), each defining the names the regular expressions find in
    it; `definitions` when the caller has already looked for them."""
    if definitions is None:
        from codewhere.defs import find_definitions  # its 22 patterns compile in 6 ms: files without a grammar only

        definitions = find_definitions(text, record.language)
    chunks: list[Chunk] = []
    for start, end, body in line_windows(text):
        defines = defined_between(definitions, start, end)
        chunks.append(
            Chunk(
                path=record.path,
                start_line=start,
                end_line=end,
                text=body,
                embed_text=embed_text_for(record.path, body),
                kind=record.kind,
                language=record.language,
                content_hash=content_hash(body),
                defines=defines,
            )
        )
    return chunks


def defined_between(definitions: list[tuple[int, str]], first: int, last: int) -> tuple[str, ...]:
    """The names of the (line, name) definitions on lines first..last, once each, in order."""
    return tuple(dict.fromkeys(name for line, name in definitions if first <= line <= last))


# ---- symbol chunks (cartog's recipe) -----------------------------------------------------------

EMBED_BYTES = 800
STORED_BYTES = 2048
MARKDOWN_SECTION_BYTES = 1500
_LEAF_PARENTS = frozenset({"function", "method"})  # a symbol nested in these belongs to its parent's chunk
_PUNCTUATION_ONLY = re.compile(r"^[\s{}()\[\];,.:]*$")
_LICENSE = re.compile(r"(copyright|licen[cs]e|spdx-license-identifier|all rights reserved)", re.IGNORECASE)
# Possessive (`*+`, `++`): the leading whitespace and the name's characters overlap, and with
# backtracking a line of 800 spaces and no `=` took O(n²) steps (a fuzzed file of such lines,
# minutes). Giving characters back never helped a match, except that a line of only whitespace and
# then `= x` no longer counts as an assignment.
_IMPORT_OR_ASSIGNMENT = re.compile(
    r"^\s*+(import\s|from\s+\S+\s+import\s|#\s*include|use\s|using\s|require[\s(]|package\s|extern\s+crate"
    r"|(export\s+)?(const|let|var|static|final)\s|[\w.\[\]'\", ]++\s*(:[^=]+)?=[^=])"
)
_COMMENT = re.compile(r"^\s*(#|//|/\*|\*|--|;)")


def utf8_prefix(text: str, limit: int) -> str:
    """At most `limit` bytes of `text`, never cutting a character in half."""
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


def symbol_header(path: str, symbol: Symbol) -> str:
    return f"File: {path} | {symbol.kind} {symbol.qualified_name}"


def symbol_embed_text(path: str, symbol: Symbol, body: str) -> str:
    """`File: path | kind name`, the signature with decorators, then the lines that carry meaning."""
    head = [symbol_header(path, symbol), *symbol.decorators, symbol.signature]
    lines = []
    # characters are at most bytes: past EMBED_BYTES characters the cut below is fixed, and the
    # rest of a long body need not be looked at
    held = sum(len(part) + 1 for part in head)
    # a licence word never spans lines: the lines holding one, from one search of the body,
    # instead of a case-blind search of every line (most bodies have none)
    licensed = {body.count("\n", 0, found.start()) for found in _LICENSE.finditer(body)}
    for row, line in enumerate(body.split("\n")[1:], start=1):
        if held > EMBED_BYTES:
            break
        stripped = line.strip()
        if not stripped or row in licensed or _PUNCTUATION_ONLY.match(stripped):
            continue
        lines.append(stripped)
        held += len(stripped) + 1
    return utf8_prefix("\n".join([*head, *lines]), EMBED_BYTES)


def _only_imports_and_assignments(body: str) -> bool:
    code = [line for line in body.split("\n") if line.strip() and not _COMMENT.match(line)]
    return bool(code) and all(_IMPORT_OR_ASSIGNMENT.match(line) for line in code)


def _window_chunks(record: FileRecord, lines: list[str], first: int, last: int) -> list[Chunk]:
    """Line windows over lines[first-1:last] (1-based, inclusive), numbered as in the file."""
    out = []
    for start, end, body in line_windows("".join(lines[first - 1 : last])):
        out.append(_chunk(record, first + start - 1, first + end - 1, body, embed_text_for(record.path, body),
                          embed=not _only_imports_and_assignments(body)))
    return out


def _chunk(record: FileRecord, start: int, end: int, body: str, embed_text: str,
           defines: tuple[str, ...] = (), embed: bool = True, recipe: str = "window", unit: Unit | None = None) -> Chunk:
    return Chunk(record.path, start, end, body, embed_text, record.kind, record.language,
                 content_hash(body, recipe), defines, embed, unit=unit)


def definition_unit(lines: list[str], symbol: Symbol, end: int) -> Unit:
    """What a hit of `symbol`'s chunks reports: from the doc comment and decorators above it
    to `end` (the symbol's last line; a class's head for its head chunk)."""
    return Unit(_with_doc_above(lines, symbol.start_line), end, symbol.qualified_name)


SPLIT_CHARS = 1500  # a longer function or method is cut into line windows of about this size (fitted on the dev split)


def symbol_chunks(record: FileRecord, text: str, symbols: tuple[Symbol, ...]) -> list[Chunk]:
    """A chunk per top-level function and per method; a head chunk per class (its lines before
    the first member); line windows for code between symbols. A symbol longer than SPLIT_CHARS
    becomes consecutive windows: the first defines its name, each names it in its vector's text,
    so a long function is found by the part that answers instead of by its first 2 KB."""
    lines = split_lines(text)
    by_name = {s.qualified_name: s for s in symbols}
    first_member: dict[str, int] = {}
    for s in symbols:
        parent = by_name.get(s.parent)
        if parent is not None and s.start_line > parent.start_line:
            first_member[s.parent] = min(first_member.get(s.parent, s.start_line), s.start_line)
    chunked: list[tuple[int, int, Symbol]] = []
    for symbol in sorted(symbols, key=lambda s: (s.start_line, -s.end_line)):
        parent = by_name.get(symbol.parent)
        if parent is not None and parent.kind in _LEAF_PARENTS:
            continue
        if symbol.kind == "module":  # namespaces and Rust mods: their members chunk, the rest is gap
            continue
        member = first_member.get(symbol.qualified_name)
        end = member - 1 if member is not None and symbol.kind not in _LEAF_PARENTS else symbol.end_line
        chunked.append((symbol.start_line, max(end, symbol.start_line), symbol))
    out: list[Chunk] = []
    covered = [False] * (len(lines) + 2)
    own_chunk: set[int] = set()
    for start, end, symbol in chunked:
        if covered[start]:
            # symbols sharing a line (minified code: thousands on one) would each store that
            # line again; the chunk holding it defines them (_define_unchunked)
            continue
        own_chunk.add(id(symbol))
        body = "".join(lines[start - 1 : end])
        if not body.strip():
            continue
        if SPLIT_CHARS and len(body) > SPLIT_CHARS:
            (_, head_end, head), *parts = line_windows(body, SPLIT_CHARS, 0)
            stored = head
        else:
            head_end, head, parts = end - start + 1, body, []
            stored = utf8_prefix(body, STORED_BYTES)
        unit = definition_unit(lines, symbol, end)
        # the symbol's header names its kind and qualified name: part of the vector's key
        out.append(_chunk(record, start, start + head_end - 1, stored, symbol_embed_text(record.path, symbol, head),
                          (symbol.name,), recipe=f"symbol:{symbol.kind}:{symbol.qualified_name}", unit=unit))
        for p_start, p_end, p_body in parts:
            out.append(_chunk(record, start + p_start - 1, start + p_end - 1, p_body,
                              f"{symbol_header(record.path, symbol)}\n{p_body}",
                              recipe=f"part:{symbol.kind}:{symbol.qualified_name}", unit=unit))
        for line in range(start, min(end, len(lines)) + 1):
            covered[line] = True
    gap_start = None
    for line in range(1, len(lines) + 2):
        if line <= len(lines) and not covered[line]:
            gap_start = gap_start or line
        elif gap_start is not None:
            out.extend(_window_chunks(record, lines, gap_start, line - 1))
            gap_start = None
    return _define_unchunked(sorted(out, key=lambda c: (c.start_line, c.end_line)), symbols, own_chunk)


def _define_unchunked(chunks: list[Chunk], symbols: tuple[Symbol, ...], chunked: set[int]) -> list[Chunk]:
    """A symbol without a chunk of its own (a Ruby module, a namespace, a closure inside a
    function) is defined by the smallest chunk holding its first line, so `Sinatra::Helpers`
    finds `module Helpers` by name."""
    extra: dict[int, list[str]] = {}
    starts = [c.start_line for c in chunks]
    for symbol in symbols:
        if id(symbol) in chunked:
            continue
        after = bisect.bisect_right(starts, symbol.start_line)
        # chunks here barely overlap (only neighbouring line windows): the holders are just before
        holding = [i for i in range(max(0, after - 4), after) if chunks[i].end_line >= symbol.start_line]
        if holding:
            smallest = min(holding, key=lambda i: chunks[i].end_line - chunks[i].start_line)
            extra.setdefault(smallest, []).append(symbol.name)
    return [replace(c, defines=tuple(dict.fromkeys([*c.defines, *extra[i]]))) if i in extra else c
            for i, c in enumerate(chunks)]


# ---- definition pieces (languages without a grammar) -------------------------------------------

DEFINITION_PIECE_CHARS = 800  # pieces cut at definitions are merged up to this size; longer ones windowed
_DOC_BLOCK_END = re.compile(r'^\s*("""|\'\'\')\s*$')
_DOC_BLOCK_START = re.compile(r'^\s*@\w+\s+~?[sS]?("""|\'\'\')')  # Elixir's @doc """ … """


def definition_chunks(record: FileRecord, text: str) -> list[Chunk]:
    """Without a grammar, the definitions the regular expressions find (defs.py) cut the file: a
    piece starts at each, with the comments and doc block right above it, and adjacent pieces
    merge up to DEFINITION_PIECE_CHARS. A function is then found as one piece instead of as the
    middle of a 2,800-character window it shares with its neighbours."""
    if record.kind not in (FileKind.CODE, FileKind.TEST):  # a LICENSE's "definitions" are prose
        return chunk_file(record, text)
    from codewhere.defs import find_definitions

    definitions = find_definitions(text, record.language)
    if not definitions:
        return chunk_file(record, text, definitions)
    lines = split_lines(text)
    starts = sorted({1, *(_with_doc_above(lines, line) for line, _ in definitions)})
    pieces = [(start, end - 1) for start, end in zip(starts, [*starts[1:], len(lines) + 1], strict=True) if start <= end - 1]
    merged: list[tuple[int, int]] = []
    size = 0
    for start, end in pieces:
        length = sum(len(line) for line in lines[start - 1 : end])
        if merged and size + length <= DEFINITION_PIECE_CHARS:
            merged[-1] = (merged[-1][0], end)
            size += length
        else:
            merged.append((start, end))
            size = length
    out: list[Chunk] = []
    for start, end in merged:
        for w_start, w_end, body in line_windows("".join(lines[start - 1 : end]), DEFINITION_PIECE_CHARS, 0):
            first, last = start + w_start - 1, start + w_end - 1
            out.append(_chunk(record, first, last, body, embed_text_for(record.path, body),
                              defined_between(definitions, first, last)))
    return out


def _with_doc_above(lines: list[str], line: int) -> int:
    """The first line of the comments and doc block directly above a definition's line."""
    first = line
    while first > 1:
        above = lines[first - 2]
        if _COMMENT.match(above) or above.lstrip().startswith("@"):
            first -= 1
        elif _DOC_BLOCK_END.match(above):
            opening = next((i for i in range(first - 2, max(0, first - 200), -1) if _DOC_BLOCK_START.match(lines[i - 1])), None)
            if opening is None:
                break
            first = opening
        else:
            break
    return first


# ---- markdown ----------------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_chunks(record: FileRecord, text: str) -> list[Chunk]:
    """One chunk per heading section, prefixed by its heading path; big sections split by
    paragraph near 1,500 bytes; a file without headings gets line windows."""
    lines = split_lines(text)
    sections: list[tuple[int, list[str]]] = []  # (first line of section, heading path)
    path: list[str] = []
    in_fence = False
    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line.rstrip("\n"))
        if match:
            level = len(match.group(1))
            path = path[: level - 1] + [match.group(2)]
            sections.append((number, list(path)))
    if not sections:
        return _window_chunks(record, lines, 1, len(lines)) if lines else []
    if sections[0][0] > 1:
        sections.insert(0, (1, []))
    out: list[Chunk] = []
    for i, (first, heading_path) in enumerate(sections):
        last = sections[i + 1][0] - 1 if i + 1 < len(sections) else len(lines)
        prefix = " > ".join(heading_path)
        for start, end in _paragraph_pieces(lines, first, last):
            body = "".join(lines[start - 1 : end])
            if body.strip():
                out.append(_chunk(record, start, end, body,
                                  f"{record.path}\n{prefix}\n{body}" if prefix else embed_text_for(record.path, body),
                                  recipe=f"markdown:{prefix}"))
    return out


def _paragraph_pieces(lines: list[str], first: int, last: int) -> list[tuple[int, int]]:
    """Split lines first..last at blank lines into pieces of about MARKDOWN_SECTION_BYTES."""
    pieces: list[tuple[int, int]] = []
    start, size = first, 0
    for number in range(first, last + 1):
        size += len(lines[number - 1].encode("utf-8", errors="surrogatepass"))
        at_blank = not lines[number - 1].strip()
        if size >= MARKDOWN_SECTION_BYTES and (at_blank or size >= 4 * MARKDOWN_SECTION_BYTES):
            pieces.append((start, number))
            start, size = number + 1, 0
    if start <= last:
        pieces.append((start, last))
    return pieces


# ---- choosing a chunker ------------------------------------------------------------------------

CHUNKERS = ("lines", "symbols")


def chunker_version(chunker: str) -> str:
    return f"{chunker}-{CHUNKER_VERSION}-{RECORDS_VERSION}"


# `name`, ``name()``, :func:`~pkg.name`, and snake_case( / camelCase( calls written in prose
_NAMED_IN_PROSE = re.compile(
    r"`+([A-Za-z_][\w.:]*)(?:\(\))?`+|:(?:func|meth|class|attr|obj):`~?([\w.]+)`|\b([a-z]+_[a-z_]+|[a-z]+[A-Z]\w+)\("
)
MENTION_LINES = 20  # a doc section names its subject near its top
MENTION_MIN_CHARS = 4  # shorter names (`id`, `get`) are defined everywhere and point nowhere


def mentioned_names(text: str) -> tuple[str, ...]:
    """Compound names of the code a documentation chunk mentions in its first lines."""
    head = "\n".join(text.split("\n", MENTION_LINES)[:MENTION_LINES])
    names = (
        compound(next(g for g in m.groups() if g).split(".")[-1].split(":")[-1]) for m in _NAMED_IN_PROSE.finditer(head)
    )
    return tuple(sorted({n for n in names if len(n) >= MENTION_MIN_CHARS}))


def chunk_source(record: FileRecord, text: str, symbols: tuple[Symbol, ...] | None, chunker: str) -> list[Chunk]:
    """`symbols` (parsed, or None without a grammar) and the chosen chunker decide the cut;
    documentation chunks also record the code names they mention."""
    chunks = _cut(record, text, symbols, chunker)
    if record.kind is FileKind.DOCS:
        chunks = [replace(c, mentions=mentioned_names(c.text)) for c in chunks]
    return chunks


def _cut(record: FileRecord, text: str, symbols: tuple[Symbol, ...] | None, chunker: str) -> list[Chunk]:
    if chunker == "symbols":
        if record.language == "markdown":
            return markdown_chunks(record, text)
        if symbols is not None:
            return symbol_chunks(record, text, symbols)
        return definition_chunks(record, text)
    chunks = chunk_file(record, text)
    if symbols:  # the parser knows the definitions better than the regular expressions
        chunks = [
            replace(c, defines=tuple(dict.fromkeys(s.name for s in symbols if c.start_line <= s.start_line <= c.end_line)))
            for c in chunks
        ]
    return chunks


def text_offsets(text: str, chunks: Sequence[Chunk]) -> list[int]:
    """Where each chunk's text starts in its file's text; -1 for a text that is not a slice of it."""
    starts = line_starts(text)
    return [text_offset(text, starts, c.text, c.start_line, c.end_line) for c in chunks]


def line_starts(text: str) -> list[int]:
    """The offset in `text` of each line's first character (lines as split_lines counts them)."""
    return [0, *(m.end() for m in re.finditer("\n", text))]


def text_offset(text: str, starts: list[int], body: str, start_line: int, end_line: int) -> int:
    """Where `body`, the text of lines start_line..end_line or a piece of them, starts in `text`; -1: nowhere."""
    if not 0 < start_line <= end_line or start_line > len(starts):
        return -1
    after = starts[end_line] if end_line < len(starts) else len(text)
    return text.find(body, starts[start_line - 1], after)
