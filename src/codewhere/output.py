"""What codewhere answers, as data: one typed shape per answer, shared by `--json` and the MCP
tools (which declare these shapes as their output schemas). render.py turns the same records
into text for people.

Locations are `path:start-end` (1-based, inclusive; `repo:path:start-end` from a shared index);
the parts are there too, for programs that would rather not parse them.
"""

from __future__ import annotations

from collections.abc import Sequence

from typing_extensions import NotRequired, TypedDict

from codewhere.gitinfo import GitState
from codewhere.graph import Impact, Reference
from codewhere.indexer import IndexReport
from codewhere.precise import HIDDEN_META
from codewhere.store import StoreStats
from codewhere.store.base import RoutedOut
from codewhere.types import Hit, SymbolRow

# `why`: each retriever that found the chunk and its 1-based rank there, then each ranking signal
# that changed its score with its factor (`evidence`: the chunks whose evidence it received;
# `function`: the chunk's definition's place among its file's, when that is not the score's order)
Why = TypedDict("Why", {
    "keyword": int, "semantic": int, "names": int,
    "definition": float, "evidence": list[int], "kind-prior": float, "signature": float, "path": float,
    "size": float, "folder": float, "coherence": float, "file-words": float, "function": int, "rerank": float,
}, total=False)


class HitOut(TypedDict):
    location: str
    path: str  # relative to the root, `/` separators
    start_line: int  # the definition the hit belongs to, from its decorators and doc comment (or the window's lines)
    end_line: int
    symbol: str  # that definition's qualified name (`Session.resolve_redirects`); "" for a window of no definition
    repo: NotRequired[str]  # only from a shared index
    kind: str  # code, test, docs or config
    language: str
    score: float  # orders the hits; its scale depends on the mode
    snippet: str
    snippet_line: int  # the line number of the snippet's first line
    why: Why


class SearchOut(TypedDict):
    query: NotRequired[str]  # absent from find_related, which starts from a place, not words
    root: NotRequired[str]
    hits: list[HitOut]
    trimmed: NotRequired[bool]  # MCP: snippets were cut to fit the answer's token budget
    dropped: NotRequired[int]  # MCP: hits left out to fit it
    index: NotRequired[str]  # MCP: the index was being refreshed as this answer was given, and how far
    paths: NotRequired[list[str]]  # ripgrep's -l: the hits' paths, best first, once each
    ranking: NotRequired[str]  # the parameter set that ranked (search/ranking_sets.py): the model it was fitted for, or neutral
    replica: NotRequired[str]  # a team index read on a replica that is behind the primary: by how much
    repositories: NotRequired[RoutedOut]  # a search across a team index of many repositories: the ones it read


class SymbolOut(TypedDict):
    name: str
    qualified_name: str  # `Session.resolve_redirects`
    kind: str  # function, method, class, struct, interface, trait, enum, module, type
    location: str
    path: str
    start_line: int
    end_line: int
    signature: str
    parent: str  # the enclosing symbol's qualified name, "" at module level


# `from`: the enclosing symbol of the reference (None at module level); `to`: the symbol referred to
# (None when unresolved, or when a precise source found it reaches no symbol of the repository);
# `resolution`: how `to` was found, surest first: scip, lsp, jedi (compiler-grade), import,
# same-file, unique (by name alone), ambiguous, external (not pinned); `target_name`: as written
ReferenceOut = TypedDict("ReferenceOut", {
    "kind": str, "location": str, "path": str, "line": int, "resolution": str,
    "from": SymbolOut | None, "to": SymbolOut | None, "target_name": str,
})


class ImpactOut(SymbolOut):
    distance: int  # calls or inheritance steps from the symbol asked about
    via: str  # call or inherit
    weakest: str  # the least sure resolution on the path to it (see ReferenceOut.resolution)


class SymbolsOut(TypedDict):
    symbols: list[SymbolOut]
    path: NotRequired[str]  # outline: the file


class GraphOut(TypedDict):
    symbol: SymbolOut
    references: list[ReferenceOut]
    cut: NotRequired[str]  # why the list stops early


class ImpactAnswerOut(TypedDict):
    symbol: SymbolOut
    impact: list[ImpactOut]
    cut: str  # why the walk stopped early; "" when it is complete


def location(path: str, start: int, end: int | None = None, repo: str = "") -> str:
    return f"{repo + ':' if repo else ''}{path}:{start}" + (f"-{end}" if end is not None else "")


def hit(h: Hit, snippet: str | None = None) -> HitOut:
    out = HitOut(location=location(h.path, h.start_line, h.end_line, h.repo), path=h.path, start_line=h.start_line,
                 end_line=h.end_line, symbol=h.symbol, kind=h.kind.value, language=h.language, score=h.score,
                 snippet=h.snippet if snippet is None else snippet, snippet_line=h.snippet_line, why=_why(h.why))
    if h.repo:
        out["repo"] = h.repo
    return out


def _why(why: dict[str, object]) -> Why:
    return Why(**why)  # type: ignore[typeddict-item]  # the engine writes only Why's keys


def search(query: str, hits: Sequence[Hit], root: str | None = None, ranking: str | None = None) -> SearchOut:
    out = SearchOut(query=query, hits=[hit(h) for h in hits])
    if root is not None:
        out["root"] = root
    if ranking is not None:
        out["ranking"] = ranking
    return out


class ReportOut(TypedDict):
    """What one refresh did."""

    files_kept: int
    files_added: int
    files_changed: int
    files_unchanged: int
    files_removed: int
    skipped: dict[str, int]  # by reason
    bytes_read: int
    chunks_written: int
    vectors_written: int  # texts the model embedded
    vectors_reused: int  # texts whose vector another index on this machine had made
    texts_truncated: int  # embedded texts cut at the model's token limit
    truncated_at: int | None  # that limit; None for a model without one
    chunks: int  # in the index afterwards
    seconds: float
    phases: dict[str, float]  # seconds of each phase the run went through (scan, files, edges, vectors), in order
    precise: list[str]  # what the precise graph passes did (SCIP merge, jedi), one line each
    precise_problems: list[str]  # SCIP documents left out (stale, not indexed), one line each
    tier: NotRequired[str]  # `index --quality`: how much of the index the quality tier covers


def report(r: IndexReport, stats: StoreStats) -> ReportOut:
    return ReportOut(files_kept=r.files_kept, files_added=r.files_added, files_changed=r.files_changed,
                     files_unchanged=r.files_unchanged, files_removed=r.files_removed,
                     skipped=dict(sorted(r.skipped.items())), bytes_read=r.bytes_read, chunks_written=r.chunks_written,
                     vectors_written=r.vectors_written, vectors_reused=r.vectors_reused, texts_truncated=r.texts_truncated, truncated_at=r.truncated_at,
                     chunks=stats.chunks, seconds=round(r.seconds, 4), phases=r.phase_seconds, precise=r.precise, precise_problems=r.precise_problems)


class GitOut(TypedDict):
    branch: str | None  # None: a detached HEAD
    commit: str
    dirty: bool | None  # tracked files differ from the commit (the index holds them as they are)


class StatusOut(TypedDict):
    """What an index holds."""

    root: str
    indexed: bool
    index: NotRequired[str]  # where it lives: a file, or a redacted DSN and repository
    repositories: NotRequired[list[str]]  # in a shared index
    files: NotRequired[int]
    chunks: NotRequired[int]
    bytes: NotRequired[int]
    model: NotRequired[str | None]  # the model its vectors were made with
    skipped_by_content: NotRequired[dict[str, int]]
    kinds: NotRequired[dict[str, int]]
    languages: NotRequired[dict[str, int]]
    meta: NotRequired[dict[str, str]]
    git: NotRequired[GitOut]  # what is checked out now (meta's git_commit: when the index last changed)
    watch: NotRequired[str]  # a server's file watcher: watching, refreshing (how far), unavailable (why)
    tier: NotRequired[str]  # the quality tier (index.quality): how much of the index MiniLM's vectors cover
    replica: NotRequired[str]  # a team index read on a replica: which, and how far behind the primary


def status(root: str, location: str, stats: StoreStats, repositories: list[str] | None = None,
           git: GitState | None = None, watch: str | None = None, tier: str | None = None,
           replica: str | None = None) -> StatusOut:
    out = StatusOut(root=root, indexed=True, index=location, files=stats.files, chunks=stats.chunks, bytes=stats.bytes,
                    model=stats.meta.get("model_id"), skipped_by_content=stats.skipped, kinds=stats.kinds,
                    languages=dict(list(stats.languages.items())[:STATUS_LANGUAGES]), meta=public_meta(stats.meta))
    if repositories is not None:
        out["repositories"] = repositories
    if git is not None:
        out["git"] = GitOut(branch=git.branch, commit=git.commit, dirty=git.dirty)
    if watch is not None:
        out["watch"] = watch
    if tier is not None:
        out["tier"] = tier
    if replica is not None:
        out["replica"] = replica
    return out


STATUS_LANGUAGES = 8  # the most-used languages a status names
# what the index keeps for itself: the freshness stamps of every folder (Django: 190,000
# characters, ~49k tokens of `index_status`), the precise passes' bookkeeping
INTERNAL_META = frozenset({"tree_stamps", *HIDDEN_META})


def public_meta(meta: dict[str, str]) -> dict[str, str]:
    """What an index's meta says to a reader: without the stamps and bookkeeping it keeps for itself."""
    return {key: value for key, value in meta.items() if key not in INTERNAL_META}


def not_indexed(root: str) -> StatusOut:
    return StatusOut(root=root, indexed=False)


def symbol(s: SymbolRow) -> SymbolOut:
    return SymbolOut(name=s.name, qualified_name=s.qualified_name, kind=s.kind,
                     location=location(s.path, s.start_line, s.end_line), path=s.path, start_line=s.start_line,
                     end_line=s.end_line, signature=s.signature, parent=s.parent)


def symbols(found: Sequence[SymbolRow], path: str | None = None) -> SymbolsOut:
    out = SymbolsOut(symbols=[symbol(s) for s in found])
    if path is not None:
        out["path"] = path
    return out


def reference(r: Reference) -> ReferenceOut:
    return {"kind": r.kind, "location": location(r.path, r.line), "path": r.path, "line": r.line,
            "resolution": r.resolution, "from": symbol(r.source) if r.source else None,
            "to": symbol(r.target) if r.target else None, "target_name": r.target_name}


def references(of: SymbolRow, found: Sequence[Reference], limit: int | None = None) -> GraphOut:
    shown = found[:limit]
    out = GraphOut(symbol=symbol(of), references=[reference(r) for r in shown])
    if len(shown) < len(found):
        out["cut"] = f"showing {len(shown)} of {len(found)}; use the CLI for the whole list"
    return out


def impact(of: SymbolRow, found: Impact, limit: int | None = None) -> ImpactAnswerOut:
    shown = found.items[:limit]
    cut = found.cut or (f"showing the nearest {len(shown)} of {len(found.items)}" if len(shown) < len(found.items) else "")
    return ImpactAnswerOut(symbol=symbol(of), cut=cut,
                           impact=[ImpactOut(**symbol(i.symbol), distance=i.distance, via=i.via, weakest=i.weakest) for i in shown])

