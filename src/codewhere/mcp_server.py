"""`codewhere mcp`: the same search and graph questions as MCP tools over stdio, for coding agents.

Every path argument is resolved and must stay inside a served root; the index is refreshed
incrementally before each answer, so an agent never reads stale line numbers; answers are
sized for a tool-result budget and secrets-looking strings are redacted.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from codewhere import output
from codewhere.api import DEFAULT_K, SearchRequest
from codewhere.errors import CodewhereError
from codewhere.indexer import Progress, Step
from codewhere.output import GraphOut, HitOut, ImpactAnswerOut, ReportOut, SearchOut, StatusOut, SymbolsOut
from codewhere.redact import redact
from codewhere.types import Hit
from codewhere.workspace import Workspace

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_MAX_TOKENS = 20_000  # under the common 25k-token tool-result cap
CHARS_PER_TOKEN = 4
SNIPPET_LINES = 12
SNIPPET_BYTES = 1_200

def size_hits(hits: list[Hit], max_tokens: int, redact_secrets: bool) -> SearchOut:
    """Hits within a budget: snippets are cut to fewer lines before any hit is dropped."""
    budget = max_tokens * CHARS_PER_TOKEN
    for lines in (SNIPPET_LINES, 4, 1, 0):
        out = [_hit(h, lines, redact_secrets) for h in hits]
        size = len(json.dumps(out))
        if size <= budget:
            return SearchOut(hits=out, trimmed=lines < SNIPPET_LINES, dropped=0)
    kept: list[HitOut] = []
    for item in out:
        if len(json.dumps(kept + [item])) > budget:
            break
        kept.append(item)
    return SearchOut(hits=kept, trimmed=True, dropped=len(hits) - len(kept))


def _hit(hit: Hit, lines: int, redact_secrets: bool) -> HitOut:
    snippet = "\n".join(hit.snippet.split("\n")[:lines])[:SNIPPET_BYTES] if lines else ""
    return output.hit(hit, redact(snippet) if redact_secrets else snippet)


def redacted_signatures(answer: T, redact_secrets: bool) -> T:
    """`answer` with every `signature` in it redacted as snippets are: a definition's first line
    (`def login(password="hunter2")`) reaches outline, symbols and graph answers too."""
    if not redact_secrets:
        return answer

    def walk(value: object) -> object:
        if isinstance(value, dict):
            return {k: (redact(v) if k == "signature" and isinstance(v, str) else walk(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(answer)  # type: ignore[return-value]


PROGRESS_EVERY = 200  # files between progress notifications while a first index is built


def build_server(workspace: Workspace) -> MCPServer:
    async def call(ctx: Context | None, work: Callable[[Progress | None], T]) -> T:
        """Run blocking work in a worker thread; indexing progress goes to the client as MCP
        progress notifications, so a large first index does not look like a hung call. A
        cancelled call stops its statement and gives up its turn."""
        notify: Progress | None = None
        if ctx is not None:
            def notify(step: Step) -> None:
                if step.phase == "vectors" or (step.phase == "files" and step.done % PROGRESS_EVERY == 0):
                    message = f"indexing {step.detail}" if step.phase == "files" else "embedding chunks"
                    anyio.from_thread.run(ctx.report_progress, step.done, step.total, message)

        try:
            return await anyio.to_thread.run_sync(workspace.call, work, notify, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            workspace.interrupt()
            raise
        except CodewhereError as exc:
            raise ToolError(str(exc)) from exc
        except ToolError:
            raise
        except Exception as exc:  # a bug: say what it was, never a bare "error executing tool"
            log.exception("tool call failed")
            raise ToolError(f"internal error: {type(exc).__name__}: {exc} — please report it") from exc

    server = MCPServer(
        "codewhere",
        instructions=(
            "Local code search over " + ", ".join(map(str, workspace.roots)) + ". Use `search` for a question in "
            "plain words or an identifier; `symbols` to find a definition by name; `callers`/`callees`/`refs`/"
            "`impact` for who uses what; `outline` to see a file's structure before reading it. Results are "
            "path:start-end ranges: read only those lines."
        ),
    )

    @server.tool()
    async def search(query: str, ctx: Context, path: str | None = None, k: int = DEFAULT_K, mode: str = "hybrid",
                     scope: list[str] | None = None, kinds: list[str] | None = None,
                     max_tokens: int = DEFAULT_MAX_TOKENS) -> SearchOut:
        """Find code by meaning or by name: a question in plain words ("where do we retry failed
        uploads") or an identifier (`raise_for_status`). Returns path:start-end ranges with short
        snippets, best first. `path` picks a served folder; `scope` limits to sub-folders;
        `kinds` keeps only these file kinds (code, test, docs, config; default: all);
        `mode` is hybrid (default), keyword or semantic."""
        def go(progress: Progress | None) -> SearchOut:
            index, rel = workspace.index_for(path, progress)
            scopes = list(scope or []) + ([rel] if rel else [])
            request = SearchRequest(query, k=k, mode=mode, scopes=tuple(scopes), kinds=None if kinds is None else tuple(kinds))
            with workspace.deadline(index):
                hits = index.run(request)
            out = SearchOut(query=query, **size_hits(hits, max_tokens, workspace.redact_secrets))
            if note := workspace.freshness(index.root):
                out["index"] = f"answered from the last committed state; the watcher is {note}"
            return out
        return await call(ctx, go)

    @server.tool()
    async def find_related(path: str, line: int, k: int = DEFAULT_K) -> SearchOut:
        """Code similar to the chunk at path:line (other implementations of the same idea)."""
        def go(progress: Progress | None) -> SearchOut:
            index, rel = workspace.index_for(path)
            with workspace.deadline(index):
                hits = index.related(rel or "", line, k)
            return size_hits(hits, DEFAULT_MAX_TOKENS, workspace.redact_secrets)
        return await call(None, go)

    @server.tool()
    async def outline(path: str) -> SymbolsOut:
        """The symbols of one file (functions, classes, methods) with kinds and line spans, nested by parent."""
        def go(progress: Progress | None) -> SymbolsOut:
            index, rel = workspace.index_for(path)
            with workspace.deadline(index):
                return redacted_signatures(output.symbols(index.outline(rel or ""), rel or ""), workspace.redact_secrets)
        return await call(None, go)

    @server.tool()
    async def symbols(query: str, path: str | None = None, k: int = 20) -> SymbolsOut:
        """Find definitions by name or part of a name (exact name first, then all words, then any)."""
        def go(progress: Progress | None) -> SymbolsOut:
            index, _ = workspace.index_for(path)
            with workspace.deadline(index):
                return redacted_signatures(output.symbols(index.symbols(query, k)), workspace.redact_secrets)
        return await call(None, go)

    def graph_tool(kind: str, name: str, path: str | None, min_confidence: str | None) -> Callable[[Progress | None], GraphOut]:
        def go(progress: Progress | None) -> GraphOut:
            index, _ = workspace.index_for(path)
            with workspace.deadline(index):
                symbol, refs = getattr(index, kind)(name, min_confidence)
            return redacted_signatures(output.references(symbol, refs, MAX_REFERENCES), workspace.redact_secrets)
        return go

    @server.tool()
    async def refs(name: str, path: str | None = None, min_confidence: str | None = None) -> GraphOut:
        """Every call, import and inheritance that refers to a symbol (name, Owner.name or path:line).
        Each says how it was found (`resolution`, surest first: scip, lsp, jedi, import, same-file,
        unique, ambiguous, external); `min_confidence` drops the less sure ones."""
        return await call(None, graph_tool("refs", name, path, min_confidence))

    @server.tool()
    async def callers(name: str, path: str | None = None, min_confidence: str | None = None) -> GraphOut:
        """Who calls this function or method (name, Owner.name or path:line); `min_confidence` as in refs."""
        return await call(None, graph_tool("callers", name, path, min_confidence))

    @server.tool()
    async def callees(name: str, path: str | None = None, min_confidence: str | None = None) -> GraphOut:
        """What this function or method calls, resolved where the name is unambiguous; `min_confidence` as in refs."""
        return await call(None, graph_tool("callees", name, path, min_confidence))

    @server.tool()
    async def impact(name: str, depth: int = 3, path: str | None = None, min_confidence: str | None = None) -> ImpactAnswerOut:
        """What may break if this symbol changes: transitive callers and subclasses, with distance and
        the weakest edge on the way (`weakest`); `min_confidence` follows only surer edges.
        Deep or wide answers are bounded; `cut` then says where the walk stopped."""
        def go(progress: Progress | None) -> ImpactAnswerOut:
            index, _ = workspace.index_for(path)
            with workspace.deadline(index):
                symbol, found = index.impact(name, depth, min_confidence)
            return redacted_signatures(output.impact(symbol, found, MAX_REFERENCES), workspace.redact_secrets)
        return await call(None, go)

    @server.tool()
    async def index_status(path: str | None = None) -> StatusOut:
        """Files, chunks, languages and model of the index of a served folder."""
        def go(progress: Progress | None) -> StatusOut:
            index, _ = workspace.index_for(path)
            return output.status(str(index.root), index.store.location, index.status(),
                                 index.repositories() if index.shared else None, index.git_state(),
                                 workspace.watch_state(index.root))
        return await call(None, go)

    @server.tool()
    async def refresh(ctx: Context, path: str | None = None) -> ReportOut:
        """Bring the index up to date now (searches also do this by themselves)."""
        def go(progress: Progress | None) -> ReportOut:
            index, _ = workspace.index_for(path, progress)
            return output.report(index.refresh(progress), index.status())
        return await call(ctx, go)

    return server


MAX_REFERENCES = 500  # graph answers list at most this many, nearest or first, and say so


CLIENT_CONFIGS = ("claude", "cursor", "codex", "vscode")


def client_config(client: str, roots: list[str]) -> str:
    """The snippet each MCP client needs to start `codewhere mcp` on these folders."""
    args = ["mcp", *[str(Path(r).resolve()) for r in roots]]
    command = str(Path(sys.argv[0]).resolve()) if sys.argv[0].endswith("codewhere") else "codewhere"
    if client == "codex":
        quoted = ", ".join(json.dumps(a) for a in args)
        return f'[mcp_servers.codewhere]\ncommand = {json.dumps(command)}\nargs = [{quoted}]\n'
    entry = {"command": command, "args": args}
    if client == "vscode":
        return json.dumps({"servers": {"codewhere": {"type": "stdio", **entry}}}, indent=2)
    return json.dumps({"mcpServers": {"codewhere": entry}}, indent=2)


def serve(roots: list[str], redact_secrets: bool = True, index_file: str | None = None, watch: bool = True,
          poll: bool = False) -> None:
    from codewhere.api import resolve_root

    workspace = Workspace([resolve_root(r) for r in roots], redact_secrets, index_file)
    if watch:
        workspace.watch(poll=poll)
    try:
        build_server(workspace).run("stdio")
    finally:
        workspace.close()
