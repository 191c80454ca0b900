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

from codewhere import output, tier
from codewhere.agent_answer import DEFAULT_LINES, compact, search_answer, tokens
from codewhere.api import DEFAULT_K, SearchRequest
from codewhere.errors import CodewhereError, QueryError
from codewhere.indexer import Progress, Step
from codewhere.redact import redact
from codewhere.workspace import Workspace

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_MAX_TOKENS = 4_000  # a search answer's ceiling; the defaults (k 5, 10 lines) stay well under it
GRAPH_MAX_TOKENS = 4_000  # graph and outline answers: the closest first, then `cut` says how to get more
GRAPH_QUESTIONS = ("callers", "callees", "refs", "impact")
DEFINITION_LINES = 200  # a definition's lines an answer holds unless asked for more (about 2,000 tokens)
# an agent's search answer holds 5 hits: on the 381 dev commit questions the answer names the
# changed function in 39.9 % of them for a median 354 tokens; 10 hits name it in 44.1 % for 692
# (benchmarks/answer_defaults.py; semble's default answer is 5 hits). `k` asks for more.
SEARCH_K = 5


def fitted(answer: T, key: str, offset: int, max_tokens: int) -> str:
    """`answer` with its list `key` from `offset` on, as many items as fit `max_tokens`; `cut`
    says how many are left and the offset that gets them."""
    items = list(answer[key])  # type: ignore[index]
    total = len(items)
    start = max(0, offset)
    shown: list[object] = []
    for item in items[start:]:
        if tokens(compact({**answer, key: [*shown, item]})) > max_tokens:  # type: ignore[dict-item]
            break
        shown.append(item)
    out: dict[str, object] = {**answer, key: shown}  # type: ignore[dict-item]
    end = start + len(shown)
    if end < total:
        out["cut"] = f"showing {start + 1}-{end} of {total}; pass offset={end} for more"
    elif start:
        out["cut"] = f"showing {start + 1}-{end} of {total}"
    return compact(out)


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
            "plain words or an identifier; `symbols` to find a definition by name and `definition` to read it; "
            "`graph` for who calls or uses what; `outline` to see a file's structure before reading it. Results are "
            "path:start-end ranges: read only those lines."
        ),
    )

    @server.tool(structured_output=False)
    async def search(query: str, ctx: Context, path: str | None = None, k: int = SEARCH_K, mode: str = "hybrid",
                     scope: list[str] | None = None, kinds: list[str] | None = None, max_lines: int = DEFAULT_LINES,
                     max_tokens: int = DEFAULT_MAX_TOKENS, explain: bool = False) -> str:
        """Find code by meaning or by name: a question in plain words ("where do we retry failed
        uploads") or an identifier (`raise_for_status`). Use it before grep. Returns path:start-end
        of whole definitions, best first, each with its first line and the matching lines
        (`max_lines`, 0 = locations only). `scope`: sub-folders; `kinds`: code, test, docs, config;
        `mode`: hybrid, keyword or semantic; `explain`: why each hit ranked."""
        def go(progress: Progress | None) -> str:
            index, rel = workspace.index_for(path, progress)
            scopes = list(scope or []) + ([rel] if rel else [])
            request = SearchRequest(query, k=k, mode=mode, scopes=tuple(scopes), kinds=None if kinds is None else tuple(kinds))
            with workspace.deadline(index):
                hits = index.run(request)
            answer = search_answer(hits, index.file_lines, max_lines, max_tokens, explain, workspace.redact_secrets)
            if explain:
                answer["ranking"] = index.ranking_set.name
            if index.tier_reader() is not None:  # which vectors answered, where a quality tier exists
                answer["vectors"] = f"{tier.TIER_MODEL} (quality tier)"
            elif filling := workspace.tier_state(index.root):
                answer["vectors"] = f"static; {filling}"
            if note := workspace.freshness(index.root):
                answer["index"] = f"answered from the last committed state; the watcher is {note}"
            if replica := index.replica_line():
                answer["replica"] = replica
            if routed := index.routed():
                answer["repositories"] = routed.out()
            return compact(answer)
        return await call(ctx, go)

    @server.tool(structured_output=False)
    async def find_related(path: str, line: int, k: int = DEFAULT_K, max_lines: int = DEFAULT_LINES) -> str:
        """Code similar to the definition at path:line (other implementations of the same idea)."""
        def go(progress: Progress | None) -> str:
            index, rel = workspace.index_for(path)
            with workspace.deadline(index):
                hits = index.related(rel or "", line, k)
            return compact(search_answer(hits, index.file_lines, max_lines, DEFAULT_MAX_TOKENS, False, workspace.redact_secrets))
        return await call(None, go)

    @server.tool(structured_output=False)
    async def outline(path: str, offset: int = 0, max_tokens: int = GRAPH_MAX_TOKENS) -> str:
        """The definitions of one file (functions, classes, methods) with kinds and line spans: read it before the file."""
        def go(progress: Progress | None) -> str:
            index, rel = workspace.index_for(path)
            with workspace.deadline(index):
                answer = output.symbols(index.outline(rel or ""), rel or "")
            return fitted(redacted_signatures(answer, workspace.redact_secrets), "symbols", offset, max_tokens)
        return await call(None, go)

    @server.tool(structured_output=False)
    async def symbols(query: str, path: str | None = None, k: int = 20) -> str:
        """Find definitions by name or part of a name (exact name first, then all words, then any)."""
        def go(progress: Progress | None) -> str:
            index, _ = workspace.index_for(path)
            with workspace.deadline(index):
                answer = output.symbols(index.symbols(query, k))
            return fitted(redacted_signatures(answer, workspace.redact_secrets), "symbols", 0, GRAPH_MAX_TOKENS)
        return await call(None, go)

    @server.tool(structured_output=False)
    async def definition(name: str, path: str | None = None, max_lines: int = DEFINITION_LINES) -> str:
        """Read one definition (name, Owner.name or path:line): its location and its lines, up to
        `max_lines`, instead of opening its file."""
        def go(progress: Progress | None) -> str:
            index, _ = workspace.index_for(path)
            with workspace.deadline(index):
                symbol = index.symbol(name)
            lines = index.file_lines(symbol.path)
            if lines is None:
                raise QueryError(f"{symbol.path} cannot be read now", "refresh the index, then ask again")
            shown = lines[symbol.start_line - 1:min(symbol.end_line, symbol.start_line - 1 + max(0, max_lines))]
            code = "\n".join(shown)
            answer: dict[str, object] = {
                "location": output.location(symbol.path, symbol.start_line, symbol.end_line),
                "symbol": symbol.qualified_name, "kind": symbol.kind,
                "code": redact(code) if workspace.redact_secrets else code}
            left = symbol.end_line - symbol.start_line + 1 - len(shown)
            if left > 0:
                answer["cut"] = f"{left} more lines: ask with a larger max_lines"
            return compact(answer)
        return await call(None, go)

    @server.tool(structured_output=False)
    async def graph(name: str, question: str = "callers", depth: int = 3, path: str | None = None,
                    min_confidence: str | None = None, offset: int = 0, max_tokens: int = GRAPH_MAX_TOKENS) -> str:
        """Who uses what, for one symbol (name, Owner.name or path:line). `question`: callers (who
        calls it), callees (what it calls), refs (every call, import and inheritance of it), impact
        (what may break if it changes: callers and subclasses to `depth`, nearest first). Each edge
        says how it was found (`resolution`, surest first: scip, lsp, jedi, import, same-file,
        unique, ambiguous, external); `min_confidence` drops the less sure."""
        def go(progress: Progress | None) -> str:
            if question not in GRAPH_QUESTIONS:
                raise QueryError(f"unknown question {question!r}", f"ask one of: {', '.join(GRAPH_QUESTIONS)}")
            index, _ = workspace.index_for(path)
            with workspace.deadline(index):
                if question == "impact":
                    symbol, found = index.impact(name, depth, min_confidence)
                    answer: object = output.impact(symbol, found)
                else:
                    symbol, refs = getattr(index, question)(name, min_confidence)
                    answer = output.references(symbol, refs)
            key = "impact" if question == "impact" else "references"
            return fitted(redacted_signatures(answer, workspace.redact_secrets), key, offset, max_tokens)
        return await call(None, go)

    @server.tool(structured_output=False)
    async def index_status(path: str | None = None) -> str:
        """Files, chunks, languages, model and freshness of the index of a served folder."""
        def go(progress: Progress | None) -> str:
            index, _ = workspace.index_for(path)
            return compact(output.status(str(index.root), index.store.location, index.status(),
                                         index.repositories() if index.shared else None, index.git_state(),
                                         workspace.watch_state(index.root), workspace.tier_line(index)))
        return await call(None, go)

    @server.tool(structured_output=False)
    async def refresh(ctx: Context, path: str | None = None) -> str:
        """Bring the index up to date now (searches also do this by themselves)."""
        def go(progress: Progress | None) -> str:
            index, _ = workspace.index_for(path, progress)
            return compact(output.report(index.refresh(progress), index.status()))
        return await call(ctx, go)

    return server




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
    from codewhere.config import Settings

    workspace = Workspace([resolve_root(r) for r in roots], redact_secrets, index_file)
    if watch:
        new = [root for root in workspace.roots if index_file is None and not Settings.load(root).index_path_for(root).exists()]
        workspace.watch(poll=poll)
        for root in new:  # the client shows the server's stderr: say why the first answers are partial
            print(f"codewhere: indexing {root} in the background; until it is done an answer comes from what "
                  "is indexed so far and says so", file=sys.stderr, flush=True)
    try:
        build_server(workspace).run("stdio")
    finally:
        workspace.close()

