"""`codewhere` on the command line: argument parsing and exit codes over the Index facade."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from codewhere import __version__, cli_examples, hit_filter, output, render
from codewhere.api import (
    DEFAULT_K,
    EVAL_DEPTH,
    EVAL_METHODS,
    Index,
    SearchRequest,
    default_root,
    eval_method,
    resolve_root,
    root_for_file,
)
from codewhere.chunk import CHUNKERS
from codewhere.config import Settings
from codewhere.errors import CodewhereError, NotIndexedError, QueryError
from codewhere.graph import CONFIDENCE
from codewhere.indexer import Progress as ProgressFn
from codewhere.indexer import Step
from codewhere.progress import ConsoleLogHandler, model_build_steps, reporter
from codewhere.scan import GITIGNORE_MODES
from codewhere.search.ranking import SIGNALS
from codewhere.store import STORES
from codewhere.types import Mode

EXIT_HITS, EXIT_NO_HITS, EXIT_ERROR = 0, 1, 2


class OutputConsole(Console):
    """Standard output that lets a closed pipe (`codewhere search ... | head -1`) end the command
    as a success: rich's own handler exits with 1, which means "no hits" here."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


err_console = Console(stderr=True)


def _natural(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is below 0")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def _add_yes_option(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--yes", action="store_true",
                   help="index a big folder outside a git repository without asking (over 20,000 files or 500 MB)")


def _add_index_options(command: argparse.ArgumentParser, repo_filter: bool = False) -> None:
    """The options of the index a command reads and refreshes first, grouped apart in its --help."""
    p = command.add_argument_group("the index (made or refreshed first)")
    p.add_argument("--index", metavar="FILE", help="index file to use (default: one per folder in the user cache dir)")
    p.add_argument("--store", choices=STORES,
                   help="sqlite (one file per folder) or postgres (a team index at $CODEWHERE_DSN); "
                        "default: postgres when CODEWHERE_DSN is set, else sqlite")
    if repo_filter:
        p.add_argument("--repo", action="append", default=[], metavar="NAME",
                       help="search only this repository of a shared index (repeatable; default: the 20 "
                            "whose files hold the question's words best, where it holds more)")
        p.add_argument("--all-repos", action="store_true",
                       help="search every repository of a shared index, however many (slower past a few dozen)")
    else:
        p.add_argument("--repo", metavar="NAME",
                       help="the folder's repository name in a shared index (default: the folder's name)")
    p.add_argument("--chunker", choices=CHUNKERS, help="symbols (default, where a grammar exists) or lines")
    p.add_argument("--include-minified", action="store_true", default=None,
                   help="also index *.min.js, *.min.css, source maps and files whose lines average over 300 characters")
    _add_yes_option(p)
    p.add_argument("--gitignore", choices=GITIGNORE_MODES,
                   help="apply .gitignore files: auto (default: inside a git repository, as git and ripgrep do), "
                        "always, or never; .ignore and .codewhereignore always apply")
    p.add_argument(
        "--model", metavar="NAME",
        help="embedding model: 'default', a model2vec folder or Hugging Face id (default: $CODEWHERE_MODEL, "
        "else the index's own model, else 'default')",
    )


JSON_HELP = "print the answer as JSON (docs/guide.md: --json)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codewhere", description="Local-first code search by meaning and by name.")
    parser.add_argument("--version", action="version", version=f"codewhere {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens to stderr")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress on stderr (a bar on a terminal, else a line every few seconds)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("index", help="index a folder, or refresh its index incrementally")
    p.add_argument("path", nargs="?", default=None, help="folder to index (default: the enclosing git repository, else .)")
    p.add_argument("--rebuild", action="store_true", help="build the index from scratch beside the old one, then swap it in")
    p.add_argument("--drop", action="store_true",
                   help="remove the repository (--repo NAME, default: the folder's name) from a shared index: its "
                        "partitions are detached and dropped, the other repositories stay")
    _add_quality_option(p, filled_here=True)
    p.add_argument("--wait", type=float, default=None, metavar="SECONDS", help="how long to wait for another indexer")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--scip", metavar="FILE.scip",
                   help="merge a SCIP index (scip-python, scip-typescript, …) into the graph: exact call and reference "
                        "edges; documents that no longer match their files are left out (config: graph.scip)")
    p.add_argument("--precise", action="store_true", default=None,
                   help="resolve Python call sites with jedi, in-process (slower: about 10 s per 1,000 call sites; "
                        "then only changed files; config: graph.precise)")
    p.add_argument("--lsp", action="store_true", default=None,
                   help="ask the installed language servers (pyright-langserver, typescript-language-server, clangd) "
                        "where each call site's definition is; then only changed files (config: graph.lsp)")
    p.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help="processes reading and chunking files (default: one per core; config: index.workers)")
    _add_index_options(p)

    p = sub.add_parser("search", help="search a folder (refreshing its index first)")
    p.add_argument("query")
    p.add_argument("path", nargs="?", default=None, help="folder to search (default: the enclosing git repository, else .)")
    p.add_argument("-k", type=int, default=DEFAULT_K, help=f"number of results (default {DEFAULT_K})")
    p.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.HYBRID.value,
                   help="keyword (BM25), semantic (vectors) or hybrid (both, fused by RRF; default)")
    p.add_argument("--scope", action="append", default=[], metavar="PREFIX", help="only paths under PREFIX (repeatable)")
    p.add_argument("--exclude-tests", action="store_true", help="leave test files out")
    p.add_argument("--exclude-docs", action="store_true", help="leave documentation out")
    p.add_argument("--no-signal", action="append", default=[], metavar="NAME",
                   help=f"switch a ranking signal off (repeatable): {', '.join(SIGNALS)}, or all")
    p.add_argument("--no-rerank", action="store_true", help="skip the configured cross-encoder re-ranker")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    rg = p.add_argument_group("ripgrep's habits")
    rg.add_argument("-g", "--glob", action="append", default=[], metavar="GLOB",
                    help="only paths matching GLOB, gitignore syntax (`*.py`, `src/**/test_*`); `!GLOB` leaves them out (repeatable)")
    rg.add_argument("-t", "--type", action="append", default=[], metavar="LANG",
                    help="only files of this language (py, js, ts, go, rust, java, c, cpp, …; repeatable)")
    rg.add_argument("-l", "--files-with-matches", action="store_true", help="print only the paths of the hits, best first, once each")
    rg.add_argument("-C", "--context", type=_natural, metavar="N", help="show N lines before and after each hit's lines")
    rg.add_argument("-A", "--after-context", type=_natural, metavar="N", help="show N lines after each hit's lines")
    rg.add_argument("-B", "--before-context", type=_natural, metavar="N", help="show N lines before each hit's lines")
    rg.add_argument("--max-lines", type=_natural, metavar="N", help="show at most N lines of each hit (0: the header line only)")
    rg.add_argument("-i", "--ignore-case", action="store_true", help="accepted; a search always ignores case")
    _add_index_options(p, repo_filter=True)

    p = sub.add_parser("eval", help="score every retrieval mode on a query file (the study's table)")
    p.add_argument("queries", help="query file: the study's JSON format or a semble annotation file")
    p.add_argument("path", nargs="?", default=None, help="folder the queries are about (default: the enclosing git repository, else .)")
    p.add_argument("--scope", action="append", default=[], metavar="PREFIX", help="search only under PREFIX (repeatable)")
    p.add_argument("--modes", default=",".join(EVAL_METHODS),
                   help="comma-separated columns: keyword, semantic, fusion (RRF alone), hybrid (with signals), "
                        "-SIGNAL (hybrid without one), +SIGNAL (fusion with one)")
    p.add_argument("--ablation", action="store_true", help="add a -SIGNAL column for every signal")
    p.add_argument("--depth", type=int, default=EVAL_DEPTH, help=f"ranks searched per query (default {EVAL_DEPTH})")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON")
    fmt.add_argument("--csv", action="store_true", help="print CSV")
    p.add_argument("--report", metavar="FILE.html", help="also write a self-contained HTML report")
    _add_index_options(p)

    for name, help_text in (
        ("refs", "every call, import and inheritance that refers to a symbol"),
        ("callers", "who calls a symbol"),
        ("callees", "what a symbol calls"),
        ("impact", "what may break if a symbol changes: transitive callers and subclasses"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("name", help="a name, Owner.name, or path:line")
        p.add_argument("path", nargs="?", default=None, help="indexed folder (default: the enclosing git repository, else .)")
        if name == "impact":
            p.add_argument("--depth", type=int, default=3, help="how many call levels up (default 3)")
        p.add_argument("--min-confidence", choices=CONFIDENCE, default=None, metavar="LEVEL",
                       help=f"only edges found at least this surely, surest first: {', '.join(CONFIDENCE)}")
        p.add_argument("--json", action="store_true", help=JSON_HELP)
        _add_index_options(p)

    p = sub.add_parser("outline", help="the symbols of one file, nested")
    p.add_argument("file", help="a file inside the indexed folder")
    p.add_argument("--root", default=None,
                   help="indexed folder (default: the enclosing git repository of the current folder if it holds "
                        "the file, else the file's own repository, else its folder)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    _add_index_options(p)

    p = sub.add_parser("symbols", help="find symbols by name (exact, then all words, then any word)")
    p.add_argument("query")
    p.add_argument("path", nargs="?", default=None, help="folder (default: the enclosing git repository, else .)")
    p.add_argument("-k", type=int, default=20, help="at most this many symbols (default 20)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    _add_index_options(p)

    p = sub.add_parser("graph-stats", help="symbols and edges by resolution level, per language")
    p.add_argument("path", nargs="?", default=None, help="folder (default: the enclosing git repository, else .)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    _add_index_options(p)

    p = sub.add_parser("mcp", help="serve search and graph tools to coding agents over MCP (stdio)")
    p.add_argument("paths", nargs="*", default=None, help="folders to serve (default: the enclosing git repository, else .)")
    p.add_argument("--no-redact", action="store_true", help="do not redact secrets-looking strings in snippets")
    p.add_argument("--print-config", choices=["claude", "cursor", "codex", "vscode"],
                   help="print the client configuration snippet instead of serving")
    p.add_argument("--index", metavar="FILE", help="index file (one served folder only)")
    _add_yes_option(p)
    _add_watch_options(p)
    _add_quality_option(p)

    p = sub.add_parser("install", help="connect a coding agent: its MCP entry and a short instruction, in its own files")
    p.add_argument("--agent", required=True, choices=["claude", "cursor", "vscode", "codex"],
                   help="claude (.mcp.json, CLAUDE.md), cursor (.cursor/), vscode (.vscode/mcp.json), codex (~/.codex/config.toml, AGENTS.md)")
    p.add_argument("path", nargs="?", default=None, help="the repository (default: the enclosing git repository, else .)")
    p.add_argument("--print", dest="print_only", action="store_true", help="show what would be written, write nothing")
    p.add_argument("--uninstall", action="store_true", help="remove what install wrote (and nothing else)")
    p.add_argument("--json", action="store_true", help="the files written or removed, as JSON")

    p = sub.add_parser("watch", help="keep a folder's index current as files change, until interrupted")
    p.add_argument("paths", nargs="*", default=None, help="folders to watch (default: the enclosing git repository, else .)")
    _add_yes_option(p)
    p.add_argument("--poll", action="store_true",
                   help="look for changes by polling (network file systems, where change events do not arrive)")
    _add_quality_option(p)

    p = sub.add_parser("model", help="the default embedding model's base: rebuild it from its weights and check it")
    model_sub = p.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    build = model_sub.add_parser("build", help="build minilm-static-1 from all-MiniLM-L6-v2 (needs the weights package): "
                                               "the base the shipped default was trained from, and the previous default; "
                                               "say whether it is the base the shipped model records")
    build.add_argument("--out", metavar="FOLDER", default=None,
                       help="where to write it (default: a folder in the models cache dir); replaced if present")
    build.add_argument("--json", action="store_true", help=JSON_HELP)

    p = sub.add_parser("serve", help="a local web page: search, files, symbols with their call graph, status")
    p.add_argument("paths", nargs="*", default=None, help="folders to serve (default: the enclosing git repository, else .)")
    _add_yes_option(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 takes any free one)")
    p.add_argument("--token", default=None,
                   help="a secret every request must carry (?token=, then a cookie); one is made when not given")
    p.add_argument("--no-token", action="store_true",
                   help="on loopback only: serve without a token (a machine no other account can reach)")
    p.add_argument("--editor", default=None, metavar="URL",
                   help="the 'open in editor' link, with {path} and {line} (default: vscode://file/{path}:{line}; '' hides it)")
    p.add_argument("--eval", dest="eval_queries", metavar="QUERIES", default=None,
                   help="a query file to score on the page's eval view (as `codewhere eval --report` does)")
    _add_watch_options(p)
    _add_quality_option(p)

    p = sub.add_parser("config", help="print the effective settings and where each came from")
    p.add_argument("path", nargs="?", default=None, help="folder whose codewhere.toml counts (default: the enclosing git repository, else .)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)

    p = sub.add_parser("status", help="describe a folder's index")
    p.add_argument("path", nargs="?", default=None, help="folder (default: the enclosing git repository, else .)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    _add_index_options(p)
    for command in [*sub.choices.values(), *model_sub.choices.values()]:  # after the command too: `codewhere index --quiet` reads as it should
        command.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                             help="no progress on stderr")
    for name, command in sub.choices.items():  # examples under each command's --help (and docs/cli.md)
        if (text := cli_examples.epilog(name)) is not None:
            command.epilog, command.formatter_class = text, argparse.RawDescriptionHelpFormatter
    return parser


def _add_quality_option(p: argparse.ArgumentParser, filled_here: bool = False) -> None:
    p.add_argument("--quality", action="store_true", default=None,
                   help=("also embed every text with MiniLM (onnx:minilm, pip install 'codewhere[onnx]'), now, after the "
                         "index; searches use it once it covers the index (config: index.quality)") if filled_here else
                        ("fill the quality tier (MiniLM's vectors) in the background at low priority; searches use it "
                         "once it covers the index (config: index.quality)"))


def _add_watch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-watch", action="store_true",
                   help="no file watcher: check every file before each answer instead")
    p.add_argument("--poll", action="store_true",
                   help="watch by polling (network file systems, where change events do not arrive)")


def _guard_first_index(roots: Sequence[Path], named: bool, args: argparse.Namespace, index_file: str | None = None,
                       ask: bool = True) -> None:
    """guard.py's check, for each root not indexed yet (SQLite; a team index is CI's to fill)."""
    from codewhere.config import Settings
    from codewhere.guard import ask_on_terminal, check_first_index

    for root in roots:
        settings = Settings.load(root).with_flags(include_minified=getattr(args, "include_minified", None),
                                                  gitignore=getattr(args, "gitignore", None), store=getattr(args, "store", None))
        file = Path(index_file).expanduser() if index_file else settings.index_path_for(root)
        if settings.store_kind != "sqlite" or file.exists():
            continue
        confirm = settings.confirm_large and not getattr(args, "yes", False)
        interactive = ask and sys.stdin.isatty() and sys.stderr.isatty()
        check_first_index(root, named, settings.cache_dir, settings.scan_options,
                          (ask_on_terminal if interactive else None) if confirm else (lambda _question: True))


def _open(args: argparse.Namespace, rebuild: bool = False, path: str | None = None, create: bool = True,
          warm: bool = False) -> Index:
    repo = args.repo if isinstance(args.repo, str) else None  # search's --repo filters instead
    named = path or args.path
    if create:
        _guard_first_index([resolve_root(named or default_root())], bool(named), args, args.index)
    index = Index.open(
        named or default_root(), args.index, rebuild=rebuild, model=args.model, chunker=args.chunker, store=args.store, repo=repo,
        include_minified=args.include_minified, gitignore=args.gitignore, create=create, warm=warm,
        scip=getattr(args, "scip", None), precise=getattr(args, "precise", None), lsp=getattr(args, "lsp", None),
        workers=getattr(args, "workers", None),
    )
    return index


@contextmanager
def _progress(args: argparse.Namespace) -> Iterator[ProgressFn | None]:
    """Long work on stderr: a bar on a terminal, a line every few seconds elsewhere; `--quiet` hides it."""
    with reporter(err_console, quiet=args.quiet) as progress:
        yield progress


@dataclass
class Answer:
    """A command's answer: `data` is what `--json` prints (a shape of codewhere/output.py), `show`
    prints it for people (with render.py), `found` picks the exit code."""

    data: object
    show: Callable[[], None]
    found: bool = True


def _emit(args: argparse.Namespace, answer: Answer) -> int:
    if getattr(args, "json", False):
        print(json.dumps(answer.data, ensure_ascii=False))
    else:
        answer.show()
    return EXIT_HITS if answer.found else EXIT_NO_HITS


def _print_lines(lines: Sequence[str]) -> Callable[[], None]:
    def show() -> None:
        for line in lines:
            print(line)

    return show


def _cmd_index(args: argparse.Namespace) -> Answer:
    if args.drop:
        return _drop_repository(args)
    with _open(args, rebuild=args.rebuild) as index:
        with _progress(args) as progress:
            report = index.refresh(progress, wait_seconds=args.wait, rebuild=args.rebuild)
            coverage = ((index.fill_tier(progress=_tier_progress(progress), wait_seconds=args.wait) or index.tier_coverage())
                        if index.settings.quality else None)
        stats = index.status()
    lines = render.report_lines(report, stats) + ([coverage.line()] if coverage else [])
    out = output.report(report, stats)
    if coverage:
        out["tier"] = coverage.line()
    return Answer(out, _print_lines(lines))


def _tier_progress(progress: ProgressFn | None) -> Callable[[int, int], None] | None:
    """The tier fill's pages as a progress phase of their own."""
    if progress is None:
        return None
    return lambda done, total: progress(Step("tier", done, total))


def _cmd_search(args: argparse.Namespace) -> Answer:
    with _open(args) as index:
        # keyword search needs no model: it refreshes text only, unless a model was named
        vectors = args.mode != Mode.KEYWORD.value or args.model is not None
        shape = hit_filter.HitShape(
            hit_filter.HitFilter.parse(args.glob, args.type),
            args.before_context if args.before_context is not None else args.context or 0,
            args.after_context if args.after_context is not None else args.context or 0,
            args.max_lines)
        request = SearchRequest(
            args.query, k=args.k * shape.overfetch, mode=args.mode, scopes=tuple(args.scope),
            exclude_tests=args.exclude_tests, exclude_docs=args.exclude_docs, disabled_signals=tuple(args.no_signal),
            repos=tuple(args.repo), rerank=not args.no_rerank, all_repos=args.all_repos,
        )
        with _progress(args) as progress:
            hits = shape.apply(index.run_fresh(request, progress, vectors=vectors), args.k, index.file_lines)
        root = str(index.root)
        ranking = index.ranking_set.name
        replica = index.replica_line()
        routed = index.routed()

    def show() -> None:
        if args.files_with_matches:
            for path in dict.fromkeys(render.shown_path(h.path) for h in hits):
                print(path)
        else:
            render.print_hits(OutputConsole(highlight=False), hits)
        if not hits:
            err_console.print(f"no hits for {args.query!r}", highlight=False)
        if replica:
            err_console.print(replica, highlight=False)
        if routed:
            err_console.print(f"{routed.line()}; --repo NAME to choose, --all-repos for every one", highlight=False)

    answer = output.search(args.query, hits, root, ranking)
    if replica:
        answer["replica"] = replica
    if routed:
        answer["repositories"] = routed.out()
    if args.files_with_matches:
        answer["paths"] = hit_filter.paths_of(hits)
    return Answer(answer, show, bool(hits))


def _cmd_config(args: argparse.Namespace) -> Answer:
    settings = Settings.load(resolve_root(args.path or default_root()))
    rows = settings.effective()
    data = {key: {"value": str(v) if isinstance(v, Path) else v, "source": src, "env": env} for key, env, v, src in rows}
    lines = [f"{key:<26} {'' if value is None else value!s:<40} {source}{f'  (env {env})' if env and not source.startswith('env') else ''}"
             for key, env, value, source in rows]
    return Answer(data, _print_lines(lines))


def _drop_repository(args: argparse.Namespace) -> Answer:
    with _open(args, create=False) as index:
        if not index.shared:
            raise QueryError("--drop removes a repository from a shared (PostgreSQL) index",
                             f"this folder's own index is a file: delete {index.store.location} to remove it")
        repo = str(getattr(index.store, "repo", ""))
        dropped = index.drop_repository(args.wait)
    line = f"dropped repository {repo} (its partitions with it)" if dropped else f"no repository named {repo}: nothing dropped"
    return Answer({"repository": repo, "dropped": dropped}, _print_lines([line]), dropped)


def _cmd_status(args: argparse.Namespace) -> Answer:
    try:
        index = _open(args, create=False)  # describing a folder never creates its index
    except NotIndexedError as exc:
        root = resolve_root(args.path or default_root())
        return Answer(output.not_indexed(str(root)), _print_lines([f"{exc.message} — {exc.hint}"]), found=False)
    with index:
        stats = index.status()
        repositories = index.repositories() if index.shared else None
        git = index.git_state()
        tier_line = index.tier_line()
        replica = index.replica_line(always=True)
        data = output.status(str(index.root), index.store.location, stats, repositories, git, tier=tier_line, replica=replica)
        lines = render.status_lines(index.root, index.store.location, stats, repositories, git) + [
            line for line in (tier_line, replica) if line]
    return Answer(data, _print_lines(lines))


def _cmd_eval(args: argparse.Namespace) -> Answer:
    from codewhere.eval_report import html_report  # a search need not import what scores one
    from codewhere.evaluate import load_query_file, result_csv, result_data

    query_file = load_query_file(Path(args.queries))
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.ablation:
        modes += [f"-{s}" for s in SIGNALS]
    for method in modes:
        try:
            eval_method(method)
        except ValueError as exc:
            raise QueryError(f"unknown mode {method!r} in --modes", "use keyword, semantic, fusion, hybrid, -SIGNAL or +SIGNAL") from exc
    with _open(args, warm=True) as index:  # every question of the file, every method: keep the chunks at hand
        with _progress(args) as progress:
            index.refresh_if_free(progress, vectors=any(m != Mode.KEYWORD.value for m in modes))
        result = index.evaluate(query_file, modes, args.scope, args.depth)
    if args.report:
        Path(args.report).write_text(html_report(result, args.depth), encoding="utf-8")

    def show() -> None:
        if args.csv:
            print(result_csv(result), end="")
            return
        out = OutputConsole(highlight=False)
        if not out.is_terminal:
            out = OutputConsole(highlight=False, width=200)  # a table piped to a file should not wrap at 80
        out.print(render.eval_table(result, args.depth))

    return Answer(result_data(result), show)


def _graph_index(args: argparse.Namespace, path: str | None = None) -> Index:
    """Graph commands need symbols, not vectors: refresh text only."""
    index = _open(args, path=path)
    if not index.shared:
        with _progress(args) as progress:
            index.refresh_if_free(progress, vectors=False)
    return index


def _cmd_graph(args: argparse.Namespace) -> Answer:
    with _graph_index(args) as index:
        if args.command == "impact":
            symbol, found = index.impact(args.name, args.depth, args.min_confidence)

            def show_impact() -> None:
                if found.cut:
                    err_console.print(f"codewhere: impact {found.cut}", highlight=False, markup=False)
                print(render.symbol_line(symbol))
                for item in found.items:
                    print(f"  {item.distance}  {item.via:<7} {render.symbol_line(item.symbol)}  [weakest: {item.weakest}]")

            return Answer(output.impact(symbol, found), show_impact, bool(found.items))
        symbol, references = getattr(index, args.command)(args.name, args.min_confidence)
    lines = [render.symbol_line(symbol)] + ["  " + render.reference_line(r, outgoing=args.command == "callees") for r in references]
    return Answer(output.references(symbol, references), _print_lines(lines), bool(references))


def _cmd_outline(args: argparse.Namespace) -> Answer:
    file = Path(args.file)
    target = file if file.is_absolute() else (Path.cwd() / file)
    root = args.root or str(root_for_file(target))
    with _graph_index(args, path=root) as index:
        symbols = index.outline(str(target.resolve()) if target.exists() else args.file)
    path = symbols[0].path if symbols else args.file
    return Answer(output.symbols(symbols, path), _print_lines(render.outline_lines(symbols)), bool(symbols))


def _cmd_symbols(args: argparse.Namespace) -> Answer:
    with _graph_index(args) as index:
        found = index.symbols(args.query, args.k)
    return Answer(output.symbols(found), _print_lines([render.symbol_line(s) for s in found]), bool(found))


def _cmd_graph_stats(args: argparse.Namespace) -> Answer:
    with _graph_index(args) as index:
        stats: dict[str, Any] = index.graph_stats()
    return Answer(stats, _print_lines(render.graph_stats_lines(stats)))


def _cmd_model(args: argparse.Namespace) -> Answer:
    import hashlib

    import numpy as np
    from safetensors.numpy import load_file

    from codewhere.embed import distill
    from codewhere.embed.registry import built_model_folder, shipped_model_folder

    settings = Settings.load(resolve_root(default_root()))
    target = Path(args.out).expanduser().resolve() if args.out else built_model_folder(settings.model_cache)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _progress(args) as progress:
        fingerprint = distill.build_static_model(target, model_build_steps(progress) if progress else None)
    shipped = shipped_model_folder()
    data: dict[str, Any] = {"folder": str(target), "recipe": distill.RECIPE_VERSION, "weights_fingerprint": fingerprint,
                            "shipped": str(shipped) if shipped else None}
    lines = [f"built {distill.RECIPE_VERSION} into {target}", f"weights sha256 (combined): {fingerprint}"]
    base = json.loads((shipped / "config.json").read_text()).get("base") if shipped else None
    if not isinstance(base, dict):
        lines.append("this installation ships no trained default recording its base to compare with")
        return Answer(data, _print_lines(lines), True)
    table = load_file(str(target / "model.safetensors"))["embeddings"]
    identical = hashlib.sha256(np.ascontiguousarray(table).tobytes()).hexdigest() == base.get("table_sha256")
    same_weights = fingerprint == base.get("source_fingerprint")
    data.update(same_weights=same_weights, vectors_identical=identical)
    verdict = ("identical, byte for byte" if identical else
               "from the same weights (float rounding differs from the machine that trained it)" if same_weights else
               "from OTHER weights than the base it records")
    lines.append(f"against the base the shipped default was trained from: {verdict}")
    return Answer(data, _print_lines(lines), same_weights)


def _cmd_serve(args: argparse.Namespace) -> int:
    import secrets

    from codewhere.web.app import DEFAULT_EDITOR, LOOPBACK_HOSTS, listen, serve, warm_workspace

    def ready(address: str) -> None:
        print(address, flush=True)  # the one stdout line: scripts and tests read where to go
        err_console.print(f"codewhere: serving {address} — Ctrl-C stops", highlight=False, markup=False, soft_wrap=True)

    roots = [resolve_root(p) for p in (args.paths or [str(default_root())])]
    _guard_first_index(roots, bool(args.paths), args)
    queries = Path(args.eval_queries) if args.eval_queries else None
    if queries is not None and not queries.is_file():
        raise QueryError(f"--eval {queries} is not a file", "pass a query file (the study's JSON or a semble annotation file)")
    if args.no_token and args.host not in LOOPBACK_HOSTS:
        raise QueryError(f"--no-token is for loopback only, not --host {args.host}", "drop --no-token, or serve on 127.0.0.1")
    sock = listen(args.host, args.port)  # a taken port is said before any indexing
    with _progress(args) as progress:
        workspace = warm_workspace(roots, progress)
    if not args.no_watch:
        workspace.watch(poll=args.poll)
    serve(sock, workspace, None if args.no_token else (args.token or secrets.token_urlsafe(24)), DEFAULT_EDITOR if args.editor is None else args.editor, queries, ready)
    return EXIT_HITS


def _cmd_mcp(args: argparse.Namespace) -> int:
    from codewhere.mcp_server import client_config, serve

    if args.print_config:
        print(client_config(args.print_config, args.paths or [str(default_root())]))
        return EXIT_HITS
    roots = [resolve_root(p) for p in (args.paths or [str(default_root())])]
    _guard_first_index(roots, bool(args.paths), args, args.index if len(roots) == 1 else None, ask=False)  # stdin is the client's
    serve(args.paths or [str(default_root())], redact_secrets=not args.no_redact, index_file=args.index,
          watch=not args.no_watch, poll=args.poll)
    return EXIT_HITS


def _cmd_install(args: argparse.Namespace) -> Answer:
    from codewhere import install

    root = resolve_root(args.path or default_root())
    changes = install.plan(args.agent, root, Path.home(), uninstall=args.uninstall)
    if not args.print_only:
        install.apply(changes)
    lines: list[str] = []
    for change in changes:
        verb = ("would remove" if args.print_only else "removed") if change.after is None else \
            ("would write" if args.print_only else "wrote")
        lines.append(f"{verb} {change.path}")
        if args.print_only and change.after is not None:
            lines += ["    " + line for line in change.after.splitlines()]
    if not changes:
        lines.append(f"nothing to {'remove' if args.uninstall else 'write'}: {args.agent} is already "
                     f"{'without' if args.uninstall else 'connected to'} codewhere on {root}")
    data = {"agent": args.agent, "root": str(root), "files": [{"path": str(c.path), "removed": c.after is None} for c in changes]}
    return Answer(data, _print_lines(lines))


def _cmd_watch(args: argparse.Namespace) -> int:
    from codewhere.watch import watch_forever

    roots = [resolve_root(p) for p in (args.paths or [str(default_root())])]
    _guard_first_index(roots, bool(args.paths), args)
    with _progress(args) as progress:
        return watch_forever(roots, progress, poll=args.poll, say=lambda line: err_console.print(
            f"codewhere: {line}", highlight=False, markup=False, soft_wrap=True))


COMMANDS: dict[str, Callable[[argparse.Namespace], Answer | int]] = {
    "mcp": _cmd_mcp,
    "serve": _cmd_serve,
    "watch": _cmd_watch,
    "install": _cmd_install,
    "model": _cmd_model,
    "config": _cmd_config,
    "index": _cmd_index, "search": _cmd_search, "eval": _cmd_eval, "status": _cmd_status,
    "refs": _cmd_graph, "callers": _cmd_graph, "callees": _cmd_graph, "impact": _cmd_graph,
    "outline": _cmd_outline, "symbols": _cmd_symbols, "graph-stats": _cmd_graph_stats,
}


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; one a command does not know is told with that command's own usage line."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
        command = commands.choices.get(args.command, parser)
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    handler = ConsoleLogHandler(err_console)  # through the console that draws the bar: a warning never overwrites it
    handler.setFormatter(logging.Formatter("codewhere: %(message)s"))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[handler], force=True)
    if os.environ.get("CODEWHERE_PHASE_LOG"):  # for benchmarks/crash_bench.py: each indexing phase as it starts
        logging.getLogger("codewhere.phase").setLevel(logging.INFO)
    if getattr(args, "quality", None):  # every index this process opens (servers open one per root, per thread)
        os.environ["CODEWHERE_QUALITY"] = "1"
    try:
        answer = COMMANDS[args.command](args)
        return answer if isinstance(answer, int) else _emit(args, answer)
    except CodewhereError as exc:
        err_console.print(f"codewhere: {exc}", highlight=False, markup=False, soft_wrap=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        err_console.print("codewhere: interrupted", highlight=False)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_HITS
    except Exception as exc:  # a bug, not a user mistake: one line unless asked for the trace
        if os.environ.get("CODEWHERE_DEBUG"):
            raise
        err_console.print(
            f"codewhere: internal error: {type(exc).__name__}: {exc} — please report it; "
            "CODEWHERE_DEBUG=1 shows the traceback",
            highlight=False, markup=False, soft_wrap=True,
        )
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
