"""Language servers, asked the way an editor asks: "where is this name defined?" for each call
site, base class and imported name of the files a server understands.

Servers are optional: found on PATH when installed (pyright or basedpyright for Python,
typescript-language-server for TypeScript and JavaScript, clangd for C and C++), started once per
pass with pygls' client over stdio, shut down cleanly. A server that is missing is skipped; one
that crashes, hangs or times out costs a warning and its remaining files keep name resolution.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from codewhere import confined
from codewhere.graph import PreciseAnswer
from codewhere.precise.sites import PassRun, name_column, sites_by_file
from codewhere.types import EdgeSite

log = logging.getLogger(__name__)

REQUEST_SECONDS = 20.0  # one definition request (a server's first answers wait for its analysis)
START_SECONDS = 60.0  # starting and initializing a server


@dataclass(frozen=True)
class Server:
    name: str  # what the index report calls it
    command: tuple[str, ...]
    suffixes: tuple[str, ...]
    language_ids: tuple[tuple[str, str], ...]  # suffix → LSP language id
    # typescript-language-server (over TypeScript 5.9) and clangd without a compile_commands.json
    # answer across files only for files the client has opened (seen here): every file of their
    # languages is opened before the first question
    open_all: bool = False
    # clangd answers a definition across files from the files it has parsed: asked before it
    # parsed the one holding the definition, it answers with a header's declaration (seen under
    # load). It publishes each opened file's diagnostics once parsed: the questions wait for all
    # of them (at most one request's time; then they are asked anyway)
    waits_for_analysis: bool = False

    def speaks(self, language_id: str) -> bool:
        return any(lang == language_id for _, lang in self.language_ids)

    def language_id(self, path: str) -> str:
        return next(lang for suffix, lang in self.language_ids if path.endswith(suffix))


_PYTHON = ((".py", "python"), (".pyi", "python"))
_TYPESCRIPT = ((".tsx", "typescriptreact"), (".ts", "typescript"), (".mts", "typescript"), (".cts", "typescript"),
               (".jsx", "javascriptreact"), (".js", "javascript"), (".mjs", "javascript"), (".cjs", "javascript"))
_C = ((".c", "c"), (".h", "c"), (".cc", "cpp"), (".cpp", "cpp"), (".cxx", "cpp"), (".hpp", "cpp"), (".hh", "cpp"))
# (executable, arguments, languages, open every file first, wait for their analysis), the first
# found of each language wins
CANDIDATES: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...], bool, bool], ...] = (
    ("pyright-langserver", ("--stdio",), _PYTHON, False, False),
    ("basedpyright-langserver", ("--stdio",), _PYTHON, False, False),
    ("typescript-language-server", ("--stdio",), _TYPESCRIPT, True, False),
    ("clangd", ("--log=error",), _C, True, True),
)


def installed_servers(path: str | None = None) -> list[Server]:
    """The language servers on PATH (or `path`), one per language family."""
    found: list[Server] = []
    taken: set[str] = set()
    for executable, args, languages, open_all, waits in CANDIDATES:
        family = languages[0][1]
        if family in taken:
            continue
        where = shutil.which(executable, path=path)
        if where:
            taken.add(family)
            found.append(Server(executable, (where, *args), tuple(s for s, _ in languages), languages, open_all, waits))
    return found


def _tsserver_near(server: Server) -> str | None:
    """typescript-language-server needs TypeScript's tsserver.js: the one installed beside it
    (the same node_modules), else the one of a `tsc` on PATH."""
    candidates = [Path(os.path.realpath(server.command[0]))]
    tsc = shutil.which("tsc")
    if tsc:
        candidates.append(Path(os.path.realpath(tsc)))
    for start in candidates:
        for parent in start.parents:
            if parent.name == "node_modules":
                tsserver = parent / "typescript" / "lib" / "tsserver.js"
                if tsserver.exists():
                    return str(tsserver)
    return None


def lsp_answers(
    root: Path, sites: Iterable[EdgeSite], servers: Sequence[Server], files: Sequence[str] = (),
    on_file: Callable[[int, int, str], None] | None = None, request_seconds: float = REQUEST_SECONDS,
    start_seconds: float = START_SECONDS,
) -> tuple[list[PreciseAnswer], dict[str, PassRun]]:
    """Ask each server about the edges of the files it understands; `files` are every indexed
    file, for a server that must have them open."""
    listed = list(sites)
    answers: list[PreciseAnswer] = []
    runs: dict[str, PassRun] = {}
    for server in servers:
        by_file = sites_by_file(listed, server.suffixes)
        if not by_file:
            continue
        run = PassRun(files=len(by_file))
        started = time.perf_counter()
        try:
            opened = [f for f in files if f.endswith(server.suffixes)] if server.open_all else []
            asyncio.run(_ask(server, root, by_file, opened, answers, run, on_file, request_seconds, start_seconds))
        except TimeoutError:
            run.failed = f"it did not answer within {request_seconds:g} s (starting: {start_seconds:g} s)"
            log.warning("the language server %s hung (%s); the files it did not answer keep name resolution",
                        server.name, run.failed)
        except Exception as exc:  # a server's failure must not cost the index
            run.failed = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
            log.warning("the language server %s failed (%s); the files it did not answer keep name resolution",
                        server.name, run.failed)
        run.seconds = time.perf_counter() - started
        runs[server.name] = run
    return answers, runs


async def _ask(
    server: Server, root: Path, by_file: dict[str, list[EdgeSite]], opened: Sequence[str], answers: list[PreciseAnswer],
    run: PassRun,
    on_file: Callable[[int, int, str], None] | None, request_seconds: float, start_seconds: float,
) -> None:
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    logging.getLogger("pygls").setLevel(logging.ERROR)  # servers' log notifications are not ours to show
    client = LanguageClient("codewhere", "1")
    analysed: set[Path] = set()
    awaited: set[Path] = set()
    all_analysed = asyncio.Event()

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def diagnosed(*args: object) -> None:  # (client, params) or (params), by pygls version
        analysed.add(_resolved(str(getattr(args[-1], "uri", ""))))
        if awaited and awaited <= analysed:
            all_analysed.set()

    # the server's stderr goes nowhere: nobody reads it, and a full pipe would stall the server
    await client.start_io("sh", "-c", 'exec "$0" "$@" 2>/dev/null', *server.command, cwd=str(root),
                          start_new_session=True)  # its own process group: a kill reaches its children too
    finished = False
    try:
        options = {"tsserver": {"path": tsserver}} if (tsserver := _tsserver_near(server)) else None
        await asyncio.wait_for(client.initialize_async(lsp.InitializeParams(
            process_id=os.getpid(), root_uri=root.as_uri(), capabilities=lsp.ClientCapabilities(),
            initialization_options=options, workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        )), start_seconds)
        client.initialized(lsp.InitializedParams())
        resolved_root = root.resolve()
        texts: dict[Path, list[str]] = {}

        def open_file(path: str) -> str | None:
            try:
                text = confined.read_text(root, path)
            except OSError:
                return None
            client.text_document_did_open(lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri=(root / path).as_uri(), language_id=server.language_id(path), version=1, text=text)))
            return text

        held = {path: text for path in opened if (text := open_file(path)) is not None}
        if held and server.waits_for_analysis:
            awaited.update((root / path).resolve() for path in held)
            if not awaited <= analysed:
                with contextlib.suppress(TimeoutError):  # fewer answers across files, nothing worse
                    await asyncio.wait_for(all_analysed.wait(), request_seconds)
        for n, (path, file_sites) in enumerate(sorted(by_file.items()), start=1):
            if on_file:
                on_file(n, len(by_file), path)
            text = held[path] if path in held else open_file(path)
            if text is None:
                continue
            uri = (root / path).as_uri()
            lines = text.split("\n")
            for site in file_sites:
                run.sites += 1
                column = name_column(lines[site.line - 1], site.target_name) if 1 <= site.line <= len(lines) else None
                if column is None:
                    continue
                found = await asyncio.wait_for(client.text_document_definition_async(lsp.DefinitionParams(
                    lsp.TextDocumentIdentifier(uri=uri), lsp.Position(line=site.line - 1, character=column))), request_seconds)
                answer = _answer(site, found, resolved_root, texts)
                if answer is not None:
                    answers.append(answer)
                    run.answered += 1
            if path not in held:
                client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))
        await asyncio.wait_for(client.shutdown_async(None), request_seconds)
        client.exit(None)
        finished = True
    finally:
        await _end(client._server, wait=5.0 if finished else 0.0)
        await asyncio.wait_for(client.stop(), 10)


async def _end(process: asyncio.subprocess.Process | None, wait: float) -> None:
    """Let a server that was told to exit do so for `wait` seconds, then kill its process group."""
    if process is None:
        return
    if process.stdin is not None:
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), wait) if wait else None
    except TimeoutError:
        pass
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


def _uri_path(uri: str) -> Path:
    return Path(unquote(urlsplit(uri).path))


def _resolved(uri: str) -> Path:
    """The file a server's `file://` URI names, symbolic links resolved (as the root is)."""
    try:
        return _uri_path(uri).resolve()
    except (OSError, RuntimeError):
        return _uri_path(uri)


def _answer(site: EdgeSite, found: object, root: Path, texts: dict[Path, list[str]]) -> PreciseAnswer | None:
    """The first location a definition request gave, as an answer (None: the server had none)."""
    locations = found if isinstance(found, list) else [found] if found is not None else []
    for location in locations:
        uri = getattr(location, "uri", None) or getattr(location, "target_uri", None)
        span = getattr(location, "target_selection_range", None) or getattr(location, "range", None)
        if not uri or span is None:
            continue
        target = _uri_path(uri)
        try:
            rel = target.resolve().relative_to(root).as_posix()
        except (ValueError, OSError):
            return PreciseAnswer(site.path, site.line, site.target_name, None)
        if target not in texts:
            try:
                texts[target] = target.read_text(encoding="utf-8", errors="replace").split("\n")
            except OSError:
                texts[target] = []
        line = span.start.line
        written = texts[target][line] if line < len(texts[target]) else ""
        name = written[span.start.character:span.end.character] if span.end.line == line else ""
        return PreciseAnswer(site.path, site.line, site.target_name, rel, line + 1, name or site.target_name)
    return None
