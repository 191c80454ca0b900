"""Graph questions over the store: resolve edges to symbols, then refs, callers, callees, impact."""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from codewhere.errors import QueryError
from codewhere.store import GraphReader, IndexWriter
from codewhere.tokens import split_identifier
from codewhere.types import EdgeHit, EdgeRow, EdgeSite, SymbolRef, SymbolRow, SymbolSpan, TermQuery

CALLABLE = frozenset({"function", "method", "class", "struct"})  # a class name called is its constructor
TYPE_LIKE = frozenset({"class", "struct", "interface", "trait", "enum", "type"})


class Resolution:
    """How an edge's target was found. The precise ones come from a compiler-grade source (a
    SCIP index, a language server, jedi); the rest from names alone."""

    SCIP = "scip"
    LSP = "lsp"
    JEDI = "jedi"
    IMPORT = "import"
    SAME_FILE = "same-file"
    UNIQUE = "unique"
    AMBIGUOUS = "ambiguous"
    EXTERNAL = "external"


PRECISE = (Resolution.SCIP, Resolution.LSP, Resolution.JEDI)
GUESSES = (Resolution.SAME_FILE, Resolution.UNIQUE)  # a target chosen by name alone, among the repository's symbols
# surest first: what --min-confidence compares and what an impact path's weakest link is
CONFIDENCE = (*PRECISE, Resolution.IMPORT, Resolution.SAME_FILE, Resolution.UNIQUE, Resolution.AMBIGUOUS,
              Resolution.EXTERNAL)
_RANK = {level: n for n, level in enumerate(CONFIDENCE)}


def confidence_rank(resolution: str) -> int:
    """0 for the surest level; an unknown level (an index from before a level existed) last."""
    return _RANK.get(resolution, len(CONFIDENCE))


def parse_confidence(level: str) -> str:
    if level not in _RANK:
        raise QueryError(f"unknown confidence level {level!r}", f"pick one of: {', '.join(CONFIDENCE)}")
    return level


def meets(resolution: str, minimum: str | None) -> bool:
    return minimum is None or confidence_rank(resolution) <= confidence_rank(minimum)


def weakest(levels: Iterable[str]) -> str:
    return max(levels, key=confidence_rank, default="")


RESOLVE_BATCH = 50_000  # edges resolved and written at a time: the kernel has 4.9 M


class NameResolver:
    """Resolves edges by name alone against one set of symbols and imports.

    A member of the caller's own class wins; then a name defined in the edge's own file; then a
    name the file imports that exactly one symbol in the repo has; then a name only one symbol
    has; several candidates are ambiguous and none is external. Unresolved edges keep their name.
    """

    def __init__(self, symbols: Iterable[SymbolRef], imported: set[tuple[int, str]]) -> None:
        self.imported = imported
        self.by_name: dict[str, list[SymbolRef]] = defaultdict(list)
        for symbol in symbols:
            self.by_name[symbol.name].append(symbol)
        # an edge kind's candidates for a name, and those by file: worked out once per name, not
        # per edge (`__init__` or `get` has hundreds of symbols and thousands of edges)
        self.seen: dict[tuple[str, str], tuple[list[SymbolRef], dict[int, list[SymbolRef]]]] = {}

    def _candidates(self, edge: EdgeRow) -> tuple[list[SymbolRef], dict[int, list[SymbolRef]]]:
        key = (edge.target_name, edge.kind if edge.kind in ("call", "inherit") else "")
        if key not in self.seen:
            candidates = self.by_name.get(edge.target_name, [])
            if edge.kind == "call":
                candidates = [s for s in candidates if s.kind in CALLABLE]
            elif edge.kind == "inherit":
                candidates = [s for s in candidates if s.kind in TYPE_LIKE]
            by_file: dict[int, list[SymbolRef]] = defaultdict(list)
            for s in candidates:
                by_file[s.file_id].append(s)
            self.seen[key] = candidates, by_file
        return self.seen[key]

    def resolve(self, edges: Iterable[EdgeRow]) -> list[tuple[int, int | None, str]]:
        """(edge id, target symbol id or None, resolution) for each edge."""
        out: list[tuple[int, int | None, str]] = []
        for edge in edges:
            candidates, by_file = self._candidates(edge)
            same_file = by_file.get(edge.file_id, [])
            same_class = [s for s in same_file if edge.source_parent and s.parent == edge.source_parent]
            if edge.kind == "call" and same_class:
                out.append((edge.id, same_class[0].id, Resolution.SAME_FILE))
            elif edge.kind != "import" and same_file:
                out.append((edge.id, same_file[0].id, Resolution.SAME_FILE))
            elif len(candidates) == 1:
                imported = (edge.file_id, edge.target_name) in self.imported or edge.kind == "import"
                out.append((edge.id, candidates[0].id, Resolution.IMPORT if imported else Resolution.UNIQUE))
            elif candidates:
                out.append((edge.id, None, Resolution.AMBIGUOUS))
            else:
                out.append((edge.id, None, Resolution.EXTERNAL))
        return out


def resolve_edges(
    edges: Iterable[EdgeRow], symbols: Iterable[SymbolRef], imported: set[tuple[int, str]]
) -> list[tuple[int, int | None, str]]:
    """(edge id, target symbol id or None, resolution) for every edge, by name alone (`NameResolver`)."""
    return NameResolver(symbols, imported).resolve(edges)


def carried_over(old: Iterable[SymbolRef], new: Iterable[SymbolRef]) -> tuple[set[str], list[tuple[int, int]]]:
    """What a rewrite of some files (their symbols before, `old`, and after, `new`) does to edge
    resolution: the names whose candidates changed (their edges must be resolved again), and
    for every other name, (old id, new id) of each symbol that only changed its id, so edges
    into it can follow it. Resolution reads a candidate's file, kind and parent, and the order
    of candidates within one file: a name whose candidates agree on all of those, in id order,
    resolves every edge to the same place."""
    def by_name(symbols: Iterable[SymbolRef]) -> dict[str, list[SymbolRef]]:
        grouped: dict[str, list[SymbolRef]] = defaultdict(list)
        for symbol in sorted(symbols, key=lambda s: s.id):
            grouped[symbol.name].append(symbol)
        return grouped

    before, after = by_name(old), by_name(new)
    changed: set[str] = set()
    moves: list[tuple[int, int]] = []
    for name in before.keys() | after.keys():
        was, now = before.get(name, []), after.get(name, [])
        if [(s.file_id, s.kind, s.parent) for s in was] != [(s.file_id, s.kind, s.parent) for s in now]:
            changed.add(name)
        else:
            moves += [(a.id, b.id) for a, b in zip(was, now, strict=True) if a.id != b.id]
    return changed, moves


@dataclass(frozen=True)
class PreciseAnswer:
    """What a precise source says of one reference: the name as written at `path:line`, and the
    definition it refers to (its name's line), or `target_path` None when that lies outside the
    repository."""

    path: str
    line: int
    name: str
    target_path: str | None
    target_line: int = 0
    target_name: str = ""


CONSTRUCTORS = frozenset({"constructor", "__init__", "__new__"})


def precise_targets(
    sites: Iterable[EdgeSite], spans: Iterable[SymbolSpan], answers: Iterable[PreciseAnswer], how: str
) -> list[tuple[int, int | None, str]]:
    """(edge id, target symbol id or None, `how`) for each edge a precise answer speaks of.

    An answer matches an edge by file, line and name. Its target is the innermost symbol of
    that name whose span holds the definition's line (the class, for a constructor called by the
    class's name); a definition inside the repository that
    is no symbol (a parameter, a variable holding a function) and one outside it give no target:
    the edge is then known not to reach any symbol, whatever its name matches. Edges no answer
    speaks of are left as they are."""
    by_site: dict[tuple[str, int, str], PreciseAnswer] = {}
    for said in answers:
        by_site.setdefault((said.path, said.line, said.name), said)
    symbols: dict[tuple[str, str], list[SymbolSpan]] = defaultdict(list)
    for span in spans:
        symbols[(span.path, span.name)].append(span)
    out: list[tuple[int, int | None, str]] = []
    for site in sites:
        answer = by_site.get((site.path, site.line, site.target_name))
        if answer is None:
            continue
        target: int | None = None
        if answer.target_path is not None:
            # `new Error(…)` / `Error(…)` answered with the constructor: the edge names the class,
            # as name resolution has it, and the class's span holds its constructor
            wanted = site.target_name if answer.target_name in CONSTRUCTORS or not answer.target_name else answer.target_name
            holding = [s for s in symbols.get((answer.target_path, wanted), [])
                       if s.start_line <= answer.target_line <= s.end_line]
            if holding:
                target = max(holding, key=lambda s: (s.start_line, -s.end_line)).id
        out.append((site.id, target, how))
    return out


@dataclass(frozen=True)
class PreciseReport:
    sites: int  # edges the answers were matched against
    matched: int  # edges an answer spoke of
    resolved: int  # of those, edges given a symbol in the repository


def apply_precise(
    store: IndexWriter, answers: Iterable[PreciseAnswer], how: str, paths: Sequence[str] | None = None
) -> PreciseReport:
    """Merge precise answers into the graph: the edges of `paths` (every file when None) that an
    answer speaks of take its target and `how` as their resolution, which name resolution then
    leaves alone until their file changes or their target symbol goes away."""
    answers = list(answers)
    sites = store.edge_sites(paths)
    spans = store.symbol_spans(sorted({a.target_path for a in answers if a.target_path is not None}))
    rows = precise_targets(sites, spans, answers, how)
    with store.transaction():
        store.set_edge_targets(rows)
    return PreciseReport(len(sites), len(rows), sum(1 for _, target, _ in rows if target is not None))


def refresh_resolution(store: IndexWriter, names: Collection[str] | None = None, paths: Sequence[str] = ()) -> None:
    """Re-resolve every edge; or, after a change to the files `paths` that defined or now
    define `names`, the edges whose answer can have moved: those in the changed files and those
    naming one of `names` (a name's candidates are all that resolution reads of other files).
    An edge a precise source resolved keeps its answer while its target symbol exists (the
    store leaves it out of the inputs)."""
    edges, symbols, imported = store.resolution_inputs(None if names is None else sorted(names), paths)
    resolver = NameResolver(symbols, imported)
    with store.transaction():
        # in batches: the answers for every edge at once would hold several GB on the kernel
        pending = iter(edges)
        while batch := list(itertools.islice(pending, RESOLVE_BATCH)):
            store.set_edge_targets(resolver.resolve(batch))


# ---- choosing a symbol ----------------------------------------------------------------------


def find_symbols(store: GraphReader, spec: str) -> list[SymbolRow]:
    """`name`, `Owner.name` / `Owner::name`, or `path:line`."""
    spec = spec.strip()
    if m := re.fullmatch(r"(.+):(\d+)", spec):
        return store.symbols_at(m.group(1).lstrip("./"), int(m.group(2)))[:1]
    qualified = re.sub(r"::|#|->", ".", spec).removesuffix("()")
    if "." in qualified:
        return store.symbols_qualified(qualified)
    return store.symbols_named(qualified)


def one_symbol(store: GraphReader, spec: str) -> SymbolRow:
    found = find_symbols(store, spec)
    if not found:
        raise QueryError(f"no symbol named {spec!r} in the index", "try `codewhere symbols WORD` to find its exact name")
    if len(found) > 1:
        shown = ", ".join(f"{s.qualified_name} ({s.path}:{s.start_line})" for s in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        raise QueryError(
            f"{spec!r} names {len(found)} symbols: {shown}{more}",
            "pick one with a qualified name (Owner.name) or path:line",
        )
    return found[0]


# ---- answers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    kind: str  # call, import, inherit
    path: str
    line: int
    source: SymbolRow | None  # the enclosing symbol; None at module level
    resolution: str
    target: SymbolRow | None = None
    target_name: str = ""


def _references(store: GraphReader, hits: list[EdgeHit]) -> list[Reference]:
    rows = store.symbols_by_id([i for h in hits for i in (h.source_id, h.target_id) if i is not None])
    return [
        Reference(h.kind, h.path, h.line, rows.get(h.source_id) if h.source_id else None, h.resolution,
                  rows.get(h.target_id) if h.target_id else None, h.target_name)
        for h in hits
    ]


def refs(store: GraphReader, symbol: SymbolRow, min_confidence: str | None = None) -> list[Reference]:
    """Every call, import and inheritance that resolves to the symbol, then the ambiguous ones
    that might (same name, several candidates), each at least as sure as `min_confidence`."""
    kinds = ("call", "import", "inherit")
    resolved = store.edges_to([symbol.id], kinds)
    maybe = [h for h in store.unresolved_edges_named(symbol.name, kinds) if h.resolution == Resolution.AMBIGUOUS]
    return _references(store, [h for h in resolved + maybe if meets(h.resolution, min_confidence)])


def callers(store: GraphReader, symbol: SymbolRow, min_confidence: str | None = None) -> list[Reference]:
    return _references(store, [h for h in store.edges_to([symbol.id], ("call",)) if meets(h.resolution, min_confidence)])


def callees(store: GraphReader, symbol: SymbolRow, min_confidence: str | None = None) -> list[Reference]:
    return _references(store, [h for h in store.edges_from(symbol.id, ("call",)) if meets(h.resolution, min_confidence)])


@dataclass(frozen=True)
class Impacted:
    symbol: SymbolRow
    distance: int
    via: str  # call or inherit
    weakest: str = ""  # the least sure resolution on its path (the surest such path among the shortest)


MAX_IMPACT_DEPTH = 50  # deeper asks are answered to this depth, and say so
MAX_IMPACT_SYMBOLS = 2_000  # an answer stops growing here, and says so


@dataclass(frozen=True)
class Impact:
    """The symbols that may break, nearest first; `cut` says why the walk stopped early, if it did."""

    items: list[Impacted]
    cut: str = ""


def impact(
    store: GraphReader, symbol: SymbolRow, depth: int = 3, limit: int = MAX_IMPACT_SYMBOLS,
    min_confidence: str | None = None,
) -> Impact:
    """Symbols that may break if `symbol` changes: transitive callers and subclasses, nearest
    first, each once (at its nearest distance), with the weakest edge on the way to it. A level at
    a time: the walk ends when a level finds nothing new, so a cycle or a huge depth costs no
    more than the graph holds. Edges less sure than `min_confidence` are not followed."""
    if depth < 1:
        raise QueryError(f"--depth must be at least 1, got {depth}", "pass --depth 3")
    capped = depth > MAX_IMPACT_DEPTH
    nearest: dict[int, tuple[int, str, str]] = {symbol.id: (0, "", Resolution.SCIP)}  # distance, via, weakest
    frontier = [symbol.id]
    cut = ""
    for distance in range(1, min(depth, MAX_IMPACT_DEPTH) + 1):
        found: list[int] = []
        for edge in store.edge_sources(frontier, ("call", "inherit")):
            if not meets(edge.resolution, min_confidence):
                continue
            link = weakest((nearest[edge.target_id][2], edge.resolution))
            known = nearest.get(edge.source_id)
            if known is None:
                nearest[edge.source_id] = (distance, edge.kind, link)
                found.append(edge.source_id)
            elif known[0] == distance and confidence_rank(link) < confidence_rank(known[2]):
                nearest[edge.source_id] = (distance, edge.kind, link)  # a surer path of the same length
        if len(nearest) - 1 >= limit:
            cut = f"stopped at {limit} symbols (distance {distance}); ask about a narrower symbol or a smaller --depth"
            break
        if not found:
            capped = False  # the walk ended by itself before the cap mattered
            break
        frontier = found
    if capped and not cut:
        cut = f"depth capped at {MAX_IMPACT_DEPTH}"
    del nearest[symbol.id]
    kept = list(nearest.items())[:limit]
    rows = store.symbols_by_id([i for i, _ in kept])
    return Impact([Impacted(rows[i], distance, via, link) for i, (distance, via, link) in kept if i in rows], cut)


def symbol_search(store: GraphReader, query: str, limit: int = 20) -> list[SymbolRow]:
    """cartog's cascade over name tokens: the exact phrase, else all terms, else any term."""
    terms = [t for t in dict.fromkeys(split_identifier(query) or [query.lower()]) if t]
    compound = re.sub(r"[\W_]+", "", query).lower()
    if not terms and not compound:
        return []
    levels = []
    if compound:
        levels.append(TermQuery((compound,), "name"))
    if terms:
        levels += [TermQuery(tuple(terms), match) for match in ("phrase", "all", "any")]
    for level in levels:
        found = store.symbol_search(level, limit)
        if found:
            return found
    return []
