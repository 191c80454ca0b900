"""`codewhere serve`: a local web page over the same Index the CLI and the MCP server use.

A search box (mode, scope, folder), hits as highlighted code with their line numbers and why they
ranked, a file view with its outline, a symbol view with its callers and callees drawn as a
picture and the impact of changing it, the index's status and an eval report. Pages are rendered
on the server (Jinja2, Pygments) and need nothing from the network: no CDN, no web fonts.

Bound to 127.0.0.1 by default; another address needs a token, which every request then carries
(a `token` query parameter once, a cookie after it).
"""

from __future__ import annotations

import logging
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name, get_lexer_for_filename
from pygments.util import ClassNotFound
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from codewhere import output, render
from codewhere.api import DEFAULT_K, EVAL_DEPTH, EVAL_METHODS, Index, SearchRequest
from codewhere.errors import CodewhereError, QueryError
from codewhere.eval_report import report_body
from codewhere.evaluate import load_query_file
from codewhere.graph import Reference
from codewhere.hit_filter import HitFilter, HitShape, paths_of
from codewhere.indexer import Progress
from codewhere.languages import language_of
from codewhere.types import Hit, Mode, SymbolRow
from codewhere.web.graph_svg import Node, call_graph_svg
from codewhere.workspace import Workspace

log = logging.getLogger(__name__)

TOKEN_COOKIE = "codewhere_token"
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
DEFAULT_EDITOR = "vscode://file/{path}:{line}"  # {path} absolute, {line} 1-based
MAX_K = 100
MAX_SNIPPET_LINES = 12
MAX_CONTEXT_LINES = 200  # ripgrep's -C on the page: more is reading the file, which /file does
IMPACT_SHOWN = 200


@dataclass(frozen=True)
class WebOptions:
    token: str | None = None  # required on every request when set (any address but loopback)
    editor: str = DEFAULT_EDITOR  # the "open in editor" link; "" hides it
    eval_queries: Path | None = None  # a query file the eval page scores (the report `codewhere eval --report` writes)
    allowed_hosts: Sequence[str] = ("*",)  # Host headers served; loopback pages refuse others (DNS rebinding)


# ---- highlighting -------------------------------------------------------------------------------


@lru_cache(maxsize=128)
def _lexer_for(path: str, language: str) -> Lexer:
    for find in (lambda: get_lexer_by_name(language), lambda: get_lexer_for_filename(path)):
        try:
            return find()
        except ClassNotFound:
            continue
    return TextLexer()


def highlighted(text: str, path: str, language: str, first_line: int, marked: Sequence[int] = (), anchors: bool = False) -> str:
    """`text` as highlighted HTML whose line numbers start at `first_line`; `marked` lines (file
    line numbers) are shaded; with `anchors`, line n has the id `L-n` (a file view's links land there)."""
    formatter = HtmlFormatter(
        linenos="table", linenostart=first_line, cssclass="code", wrapcode=True,
        hl_lines=[n - first_line + 1 for n in marked], lineanchors="L" if anchors else "", anchorlinenos=anchors,
    )
    lexer = _lexer_for(path, language)
    lexer.stripnl = False  # a blank first line is still line first_line
    return highlight(text, lexer, formatter)


def pygments_css() -> str:
    return HtmlFormatter(style="default").get_style_defs(".code")


# ---- the pages ----------------------------------------------------------------------------------


class Pages:
    """Each page: read what it shows through the Index (one question at a time), then render."""

    def __init__(self, workspace: Workspace, options: WebOptions) -> None:
        self.workspace = workspace
        self.options = options
        self.templates = Environment(loader=PackageLoader("codewhere.web", "templates"), autoescape=select_autoescape())
        self.templates.globals.update(roots=[str(r) for r in workspace.roots], url=self.url)
        static = resources.files("codewhere.web") / "static"
        self.static = {
            "style.css": (static / "style.css").read_text(encoding="utf-8") + "\n" + pygments_css(),
            "app.js": (static / "app.js").read_text(encoding="utf-8"),
        }

    @staticmethod
    def url(page: str, **params: object) -> str:
        kept = {k: v for k, v in params.items() if v not in (None, "", ())}
        return page + ("?" + urlencode(kept, doseq=True) if kept else "")

    # ---- plumbing --------------------------------------------------------------------------

    def _root(self, request: Request) -> int:
        raw = request.query_params.get("root", "0")
        if not raw.isdigit() or int(raw) >= len(self.workspace.roots):
            raise QueryError(f"no served folder number {raw}", f"use 0 to {len(self.workspace.roots) - 1}")
        return int(raw)

    def _ask(self, root: int, work: Callable[[Index], Any]) -> Any:
        def go(_progress: object) -> Any:
            index = self.workspace.open(self.workspace.roots[root])
            with self.workspace.deadline(index):
                return work(index)
        return self.workspace.call(go)

    def render(self, template: str, status: int = 200, **values: object) -> HTMLResponse:
        return HTMLResponse(self.templates.get_template(template).render(**values), status_code=status)

    def error(self, exc: Exception, status: int = 400) -> HTMLResponse:
        if isinstance(exc, CodewhereError):
            return self.render("error.html", status, message=exc.message, hint=exc.hint)
        log.exception("page failed")
        return self.render("error.html", 500, message=f"internal error: {type(exc).__name__}: {exc}",
                           hint="please report it; the server's log has the traceback")

    def guarded(self, page: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def run(request: Request) -> Response:
            try:
                return page(request)
            except Exception as exc:  # a page never answers with a bare 500: it says what went wrong
                return self.error(exc)
        return run

    # ---- search ----------------------------------------------------------------------------

    def _search_request(self, request: Request) -> tuple[int, SearchRequest | None, HitShape, int]:
        """The query (asking `shape.overfetch` times the hits shown), ripgrep's habits as the CLI
        has them (`glob` and `type`, comma-separated or repeated, `context`/`before`/`after`
        lines, `max_lines`), and how many hits to show."""
        params = request.query_params
        root = self._root(request)
        shape = HitShape(
            HitFilter.parse(_listed(params.getlist("glob")), _listed(params.getlist("type"))),
            _lines_param(params, "before", "context"), _lines_param(params, "after", "context"),
            _lines_param(params, "max_lines") if params.get("max_lines", "").strip() else None)
        query = params.get("q", "")
        if not query.strip():
            return root, None, shape, 0
        k_text = params.get("k", str(DEFAULT_K))
        if not k_text.isdigit() or not 1 <= int(k_text) <= MAX_K:
            raise QueryError(f"k must be a number from 1 to {MAX_K}, got {k_text!r}", "leave it out for 10")
        k = int(k_text)
        return root, SearchRequest(query, k=k * shape.overfetch, mode=params.get("mode", Mode.HYBRID.value),
                                   scopes=_listed(params.getlist("scope")),
                                   exclude_tests=params.get("tests") == "exclude"), shape, k

    def _shaped_hits(self, root: int, asked: SearchRequest, shape: HitShape, k: int) -> tuple[list[Hit], str]:
        return self._ask(root, lambda index: (shape.apply(index.run(asked), k, index.file_lines), index.ranking_set.name))

    def search(self, request: Request) -> Response:
        root, asked, shape, k = self._search_request(request)
        params = request.query_params
        form = {"q": params.get("q", ""), "mode": params.get("mode", Mode.HYBRID.value),
                "scope": ", ".join(params.getlist("scope")), "root": root, "tests": params.get("tests", ""),
                "glob": ", ".join(params.getlist("glob")), "type": ", ".join(params.getlist("type")),
                "context": params.get("context", ""), "files": params.get("files", "")}
        if asked is None:
            return self.render("search.html", form=form, modes=[m.value for m in Mode], hits=None, took=None)
        started = time.perf_counter()
        hits, _ = self._shaped_hits(root, asked, shape, k)
        took = (time.perf_counter() - started) * 1000
        shown = [self._hit_view(root, hit, shaped=shape.reshapes_lines) for hit in hits]
        paths = paths_of(hits) if form["files"] else None
        return self.render("search.html", form=form, modes=[m.value for m in Mode], hits=shown, took=took,
                           paths=paths, file_url=lambda path: self.url("/file", root=root, path=path))

    def _hit_view(self, root: int, hit: Hit, shaped: bool = False) -> dict[str, object]:
        first = hit.snippet_line or hit.start_line
        lines = hit.snippet.split("\n") if shaped else hit.snippet.split("\n")[:MAX_SNIPPET_LINES]
        absolute = self.workspace.roots[root] / hit.path
        return {
            "hit": hit,
            "location": output.location(hit.path, hit.start_line, hit.end_line, hit.repo),
            "file_url": self.url("/file", root=root, path=hit.path, hl=f"{hit.start_line}-{hit.end_line}") + f"#L-{first}",
            "symbol_url": self.url("/symbol", root=root, name=f"{hit.path}:{hit.start_line}") if hit.symbol else None,
            "editor_url": self.options.editor.format(path=absolute, line=first) if self.options.editor else None,
            "why": render.why_words(hit.why),
            "code": highlighted("\n".join(lines), hit.path, hit.language, first) if hit.snippet else "",
        }

    def api_search(self, request: Request) -> Response:
        try:
            root, asked, shape, k = self._search_request(request)
            if asked is None:
                raise QueryError("the query is empty", "pass ?q=words or an identifier")
            hits, ranking = self._shaped_hits(root, asked, shape, k)
        except CodewhereError as exc:
            return JSONResponse({"error": exc.message, "hint": exc.hint}, status_code=400)
        answer = output.search(asked.query, hits, str(self.workspace.roots[root]), ranking)
        if request.query_params.get("files"):
            answer["paths"] = paths_of(hits)
        return JSONResponse(answer)

    # ---- a file ----------------------------------------------------------------------------

    def file(self, request: Request) -> Response:
        root = self._root(request)
        path = request.query_params.get("path", "")
        if not path:
            raise QueryError("no file asked for", "open a file from a search hit, or pass ?path=")
        marked = _line_range(request.query_params.get("hl", ""))

        def read(index: Index) -> tuple[str, str, list[SymbolRow]]:
            rel, text = index.read_file(path)  # refuses anything that is not an indexed file under the root
            return rel, text, index.outline(rel)

        rel, text, symbols = self._ask(root, read)
        lines = text.split("\n")
        first = _page_start(request.query_params.get("from", ""), marked, len(lines))
        last = min(len(lines), first + PAGE_LINES - 1)

        def line_url(line: int) -> str:  # a line on another page is a link to that page
            if first <= line <= last:
                return f"#L-{line}"
            return self.url("/file", root=root, path=rel, **{"from": _page_start("", [line], len(lines))}) + f"#L-{line}"

        # a page outlines its own definitions (10,000 of them made 3 MB of outline); the rest are counted
        shown = [s for s in symbols if first <= s.start_line <= last] if len(symbols) > OUTLINE_WHOLE else symbols
        outline = [{"symbol": s, "depth": s.qualified_name.count("."), "line_url": line_url(s.start_line),
                    "symbol_url": self.url("/symbol", root=root, name=f"{s.path}:{s.start_line}")} for s in shown]
        page = {"first": first, "last": last,
                "earlier": self.url("/file", root=root, path=rel, **{"from": max(1, first - PAGE_LINES)}) if first > 1 else "",
                "later": self.url("/file", root=root, path=rel, **{"from": last + 1}) if last < len(lines) else ""}
        code = highlighted("\n".join(lines[first - 1 : last]), rel, language_of(rel), first, marked, anchors=True)
        return self.render("file.html", path=rel, root=root, outline=outline, code=code, lines=len(lines), page=page,
                           elsewhere=len(symbols) - len(shown))

    # ---- a symbol --------------------------------------------------------------------------

    def symbol(self, request: Request) -> Response:
        root = self._root(request)
        name = request.query_params.get("name", "").strip()
        if not name:
            raise QueryError("no symbol asked for", "pass ?name=NAME, Owner.name or path:line")
        depth_text = request.query_params.get("depth", "3")
        if not depth_text.isdigit() or not 1 <= int(depth_text) <= 10:
            raise QueryError(f"depth must be a number from 1 to 10, got {depth_text!r}", "leave it out for 3")
        depth = int(depth_text)

        def ask(index: Index) -> dict[str, object]:
            try:
                symbol = index.symbol(name)
            except QueryError as exc:
                return {"error": exc, "candidates": index.candidates(name)}
            _, callers = index.callers(f"{symbol.path}:{symbol.start_line}")
            _, callees = index.callees(f"{symbol.path}:{symbol.start_line}")
            _, impact = index.impact(f"{symbol.path}:{symbol.start_line}", depth)
            return {"symbol": symbol, "callers": callers, "callees": callees, "impact": impact}

        found = self._ask(root, ask)
        if "error" in found:
            candidates = [{"symbol": s, "url": self.url("/symbol", root=root, name=f"{s.path}:{s.start_line}")}
                          for s in found["candidates"]]
            error: QueryError = found["error"]
            return self.render("symbol.html", status=404 if not candidates else 200, symbol=None, name=name,
                               message=error.message, candidates=candidates)
        symbol: SymbolRow = found["symbol"]
        callers: list[Reference] = found["callers"]
        callees: list[Reference] = found["callees"]
        picture = call_graph_svg(
            Node(symbol.qualified_name, symbol.location, None),
            [self._node(root, r.source, r.path.rsplit("/", 1)[-1] if r.source is None else "", r, r.line) for r in callers],
            [self._node(root, r.target, r.target_name, r, r.line) for r in callees],
            more_href="#references",
        )
        impact = [{"item": item, "url": self.url("/symbol", root=root, name=f"{item.symbol.path}:{item.symbol.start_line}")}
                  for item in found["impact"].items[:IMPACT_SHOWN]]
        return self.render(
            "symbol.html", symbol=symbol, name=name, root=root, picture=picture, depth=depth,
            callers=[self._reference_view(root, r, r.source) for r in callers],
            callees=[self._reference_view(root, r, r.target) for r in callees],
            impact=impact, impact_total=len(found["impact"].items), impact_cut=found["impact"].cut,
            file_url=self.url("/file", root=root, path=symbol.path, hl=f"{symbol.start_line}-{symbol.end_line}") + f"#L-{symbol.start_line}",
        )

    def _node(self, root: int, symbol: SymbolRow | None, fallback: str, ref: Reference, line: int) -> Node:
        where = f"{ref.path}:{line} ({ref.resolution})"
        if symbol is None:
            return Node(fallback or ref.target_name or "(module level)", where, None, ref.resolution)
        return Node(symbol.qualified_name, f"{symbol.qualified_name}: {symbol.location}, called at {where}",
                    self.url("/symbol", root=root, name=f"{symbol.path}:{symbol.start_line}"), ref.resolution)

    def _reference_view(self, root: int, ref: Reference, other: SymbolRow | None) -> dict[str, object]:
        return {
            "ref": ref, "other": other,
            "at_url": self.url("/file", root=root, path=ref.path, hl=f"{ref.line}-{ref.line}") + f"#L-{ref.line}",
            "other_url": self.url("/symbol", root=root, name=f"{other.path}:{other.start_line}") if other else None,
        }

    # ---- status and eval -------------------------------------------------------------------

    def status(self, request: Request) -> Response:
        shown = []
        for i, root in enumerate(self.workspace.roots):
            def describe(index: Index) -> dict[str, object]:
                stats = index.status()
                lines = render.status_lines(index.root, index.store.location, stats,
                                            index.repositories() if index.shared else None)
                tier_line = self.workspace.tier_line(index)
                return {"fields": render.status_fields(lines + ([tier_line] if tier_line else []))}
            shown.append({"root": str(root), "number": i, **self._ask(i, describe)})
        return self.render("status.html", indexes=shown, eval_queries=self.options.eval_queries)

    def evaluation(self, request: Request) -> Response:
        queries = self.options.eval_queries
        if queries is None:
            raise QueryError("no query file to score", "start the page with `codewhere serve --eval QUERIES.json`")
        root = self._root(request)
        query_file = load_query_file(queries)
        result = self._ask(root, lambda index: index.evaluate(query_file, EVAL_METHODS, (), EVAL_DEPTH))
        return self.render("eval.html", title=f"eval: {queries.name}", body=report_body(result, EVAL_DEPTH))

    def asset(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.static:
            return PlainTextResponse("not found", status_code=404)
        kind = "text/css" if name.endswith(".css") else "text/javascript"
        return Response(self.static[name], media_type=kind, headers={"Cache-Control": "max-age=300"})


# A file view shows this many lines at a time: highlighting a 977 KB file whole made 14.5 MB of
# HTML in 3.4 s, and held the interpreter from every search meanwhile.
PAGE_LINES = 2_000
PAGE_CONTEXT = 200  # lines shown above a marked range that opens a page
OUTLINE_WHOLE = 500  # a file with more definitions outlines only the page's


def _page_start(asked: str, marked: Sequence[int], total: int) -> int:
    """The first line of the page: as asked (`from`), else a little above the marked range."""
    if asked.isdigit():
        return max(1, min(int(asked), total))
    if marked:
        return max(1, min(marked[0], total) - PAGE_CONTEXT)
    return 1


def _listed(values: list[str]) -> tuple[str, ...]:
    """Form values that may each hold several, comma-separated."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _lines_param(params: Any, name: str, fallback: str | None = None) -> int:
    """A count of lines (`before`, `after`, `max_lines`); `fallback` (`context`) stands for both sides."""
    text = (params.get(name) or (params.get(fallback) if fallback else None) or "0").strip()
    if not text.isdigit() or int(text) > MAX_CONTEXT_LINES:
        raise QueryError(f"{name if params.get(name) else fallback} must be a number of lines from 0 to {MAX_CONTEXT_LINES}, "
                         f"got {text!r}", "leave it empty for the hit's own lines")
    return int(text)


def _line_range(text: str) -> list[int]:
    start, _, end = text.partition("-")
    if not start.isdigit():
        return []
    last = int(end) if end.isdigit() else int(start)
    return list(range(int(start), min(last, int(start) + 5000) + 1))


# ---- the token ------------------------------------------------------------------------------


class TokenGate:
    """Every request carries the token: `?token=` once (it is then kept in a cookie), or the cookie."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE) or ""
        if not secrets.compare_digest(given.encode(), self.token.encode()):
            await PlainTextResponse("codewhere: this page needs its token — open the address `codewhere serve` printed",
                                    status_code=401)(scope, receive, send)
            return
        if request.query_params.get("token"):
            async def keep(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    cookie = f"{TOKEN_COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                    message.setdefault("headers", []).append((b"set-cookie", cookie.encode()))
                await send(message)
            await self.app(scope, receive, keep)  # type: ignore[arg-type]
            return
        await self.app(scope, receive, send)


def build_app(workspace: Workspace, options: WebOptions = WebOptions()) -> Starlette:
    pages = Pages(workspace, options)
    routes = [
        Route("/", pages.guarded(pages.search)),
        Route("/file", pages.guarded(pages.file)),
        Route("/symbol", pages.guarded(pages.symbol)),
        Route("/status", pages.guarded(pages.status)),
        Route("/eval", pages.guarded(pages.evaluation)),
        Route("/api/search", pages.api_search),
        Route("/static/{name}", pages.asset),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(options.allowed_hosts))]
    if options.token:
        middleware.append(Middleware(TokenGate, token=options.token))
    return Starlette(routes=routes, middleware=middleware)



def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (0: any free port), or a QueryError naming the fix."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise QueryError(f"cannot listen on {host}:{port} ({exc.strerror})", "pass another --port, or --port 0 for any free one") from exc
    sock.listen(64)
    return sock


def warm_workspace(roots: list[Path], progress: Progress | None = None) -> Workspace:
    """The served folders indexed (or refreshed) and the model loaded, so the first search is as
    fast as the next."""
    workspace = Workspace(roots)
    for root in workspace.roots:
        workspace.open(root, progress).embedder()
    return workspace


def serve(sock: socket.socket, workspace: Workspace, token: str | None = None, editor: str = DEFAULT_EDITOR,
          eval_queries: Path | None = None, ready: Callable[[str], None] | None = None) -> None:
    """Serve the page on `sock` until interrupted; `ready` is told the address to open. Every
    request needs `token` when one is given; any address but loopback always needs one (made when
    none is given). The CLI gives one on loopback too: another account on the same machine can
    reach 127.0.0.1 (`--no-token` serves without, for a machine no one else uses)."""
    import uvicorn

    host, port = sock.getsockname()[:2]
    loopback = host in LOOPBACK_HOSTS
    if not loopback and not token:
        token = secrets.token_urlsafe(24)
    hosts = ("127.0.0.1", "localhost", "[::1]", "::1") if loopback else ("*",)
    app = build_app(workspace, WebOptions(token=token, editor=editor, eval_queries=eval_queries, allowed_hosts=hosts))
    shown_host = f"[{host}]" if ":" in host else host
    address = f"http://{shown_host}:{port}/" + (f"?token={token}" if token else "")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    if ready:
        ready(address)
    try:
        server.run(sockets=[sock])
    finally:
        workspace.close()
        sock.close()
