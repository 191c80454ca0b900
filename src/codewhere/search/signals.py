"""Code-aware ranking signals: small pure functions over a fused candidate list.

Each signal takes the candidates, the parsed query and the ranking parameters and returns them
rescored, best first, recording its name and effect in each changed candidate's `why`. The engine
runs them all in one pass, `apply_signals`, which gives what running them in turn would. None
touches the database: the engine gathers the facts (kind, path, defined names, evidence links)
first. Every number they use is a field of search/params.py's RankingParams (defaults fitted on
the development split of semble's benchmark; see BENCHMARKS.md).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType
from typing import NamedTuple, Protocol

from codewhere.search.params import DEFAULT_PARAMS, RankingParams
from codewhere.search.query import Query, parse_query, stem
from codewhere.tokens import compound, split_identifier
from codewhere.types import FileKind

EXAMPLE_PATH = re.compile(r"(^|/)(examples?|samples?|demos?|benchmarks?|bench|vendor|vendored|third_party|thirdparty|compat|_compat)(/|$)", re.IGNORECASE)
_REEXPORT_FILE = re.compile(r"(^|/)(__init__\.py|index\.[cm]?[jt]sx?|mod\.rs)$")
_STUB_FILE = re.compile(r"\.(d\.ts|pyi)$")
REEXPORT_LINES = 20  # a re-export file shows itself in its first lines
_REEXPORT_LINE = re.compile(r"^\s*(from\s+\S+\s+import|import\s|export\s+(\*|\{)|pub\s+use\s|__all__|\)|[\w\s,]*,\s*$|#|$)")


_NO_WHY: Mapping[str, object] = MappingProxyType({})
Factor = Callable[["ChunkView", Query, RankingParams], float]
# module names for the kinds the per-candidate signals test: cheaper than an Enum attribute each time
_TEST, _DOCS, _CONFIG = FileKind.TEST, FileKind.DOCS, FileKind.CONFIG


class Candidate(NamedTuple):
    """A ranked chunk with its score and `why`, as the signals return it (and take it, in tests and
    apply_signals). A named tuple: several times faster to build than a frozen dataclass."""

    chunk_id: int
    score: float
    path: str
    kind: FileKind
    start_line: int
    end_line: int
    text: str  # the chunk's text; signals read only its first lines (a symbol chunk's signature)
    defines: tuple[str, ...]  # compound names the chunk defines
    why: Mapping[str, object] = _NO_WHY
    mentions: tuple[str, ...] = ()  # documentation: the code names its prose mentions
    spelled: tuple[str, ...] = ()  # the names it defines as written (`Helpers`), beside `defines`


class ChunkView(Protocol):
    """What the signals read of a chunk: a Candidate, or the store's row of it as the engine hands
    it in (no copy of fifty rows per query; scores and notes travel beside them)."""

    @property
    def chunk_id(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def kind(self) -> FileKind: ...
    @property
    def start_line(self) -> int: ...
    @property
    def end_line(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def defines(self) -> tuple[str, ...]: ...
    @property
    def mentions(self) -> tuple[str, ...]: ...
    @property
    def spelled(self) -> tuple[str, ...]: ...


# ---- signals ---------------------------------------------------------------------------------


def fusion_weights(shape: Query, p: RankingParams = DEFAULT_PARAMS) -> dict[str, float]:
    """Signal `query-shape`: identifiers lean on keyword and name lists, prose stays balanced."""
    if shape.name_like:
        return {"keyword": 1.0, "names": p.names_weight_for_identifiers, "semantic": p.semantic_weight_for_identifiers}
    return {"keyword": 1.0, "names": 1.0, "semantic": 1.0}


def defines_queried(c: ChunkView, shape: Query) -> bool:
    """The chunk defines a name the query asks for (compound: `raise_for_status` = `RaiseForStatus`)."""
    return not shape.names.isdisjoint(c.defines)


def definition_factor(c: ChunkView, shape: Query, p: RankingParams = DEFAULT_PARAMS) -> float:
    if not defines_queried(c, shape):
        return 1.0
    boost = p.definition_boost
    if shape.capitalised and shape.capitalised.isdisjoint(c.spelled):
        boost *= p.misspelled_definition_share
    if file_named_after(c.path, shape.names):
        return (1 + boost) * (1 + p.definition_file_boost)
    return 1 + boost


def file_name(path: str) -> str:
    """The file name without its extension: `src/SqlMapper.cs` → `SqlMapper`."""
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


@lru_cache(maxsize=65_536)
def file_stem(path: str) -> str:
    """`src/SqlMapper.cs` → `sqlmapper`, `lib/rack/mock_request.rb` → `mockrequest`."""
    return compound(file_name(path))


def file_named_after(path: str, names: frozenset[str]) -> bool:
    stem_ = file_stem(path)
    return stem_ in names or stem_.removesuffix("s") in names


@lru_cache(maxsize=4096)
def _only_reexports(text: str) -> bool:
    lines = [line for line in _head(text, REEXPORT_LINES).split("\n") if line.strip()]
    return bool(lines) and sum(1 for line in lines if _REEXPORT_LINE.match(line)) >= 0.8 * len(lines)


@lru_cache(maxsize=65_536)
def _path_flags(path: str) -> tuple[bool, bool, bool]:
    """(example or vendored code, declaration stub, re-export file name) of a path."""
    return bool(EXAMPLE_PATH.search(path)), bool(_STUB_FILE.search(path)), bool(_REEXPORT_FILE.search(path))


def path_prior(c: ChunkView, shape: Query, p: RankingParams = DEFAULT_PARAMS) -> float:
    factor = 1.0
    kind = c.kind
    if kind is _TEST and not shape.wants_tests:
        factor *= p.test_penalty
    elif kind is _DOCS and not shape.wants_docs:
        factor *= p.docs_penalty
    elif kind is _CONFIG:
        factor *= p.config_penalty
    example, stub, reexport_name = _path_flags(c.path)
    if example and not shape.wants_tests:
        factor *= p.example_penalty
    if stub:
        factor *= p.stub_penalty
    elif reexport_name and _only_reexports(c.text):
        factor *= p.reexport_penalty
    return factor


def is_evidence_source(c: ChunkView) -> bool:
    """Tests, examples and docs describe code in a user's words; evidence flows from them."""
    return c.kind is _TEST or c.kind is _DOCS or _path_flags(c.path)[0]


def signature_factor(c: ChunkView, shape: Query, p: RankingParams = DEFAULT_PARAMS) -> float:
    if not c.defines or not shape.term_set:
        return 1.0
    return 1 + p.signature_weight * len(shape.term_set & signature_words(c.text)) / len(shape.term_set)


def _head(text: str, lines: int) -> str:
    """The text up to the end of its `lines`-th line, without its newline (and without copying
    the rest of a long text)."""
    end = -1
    for _ in range(lines):
        end = text.find("\n", end + 1)
        if end < 0:
            return text
    return text[:end]


@lru_cache(maxsize=16_384)
def signature_words(text: str) -> frozenset[str]:
    """The words of a symbol chunk's first two lines (its name and signature), split and whole.
    Cached by the whole text: a kept chunk's text is the same string query after query, so its
    hash is computed once and no head is cut again."""
    return frozenset().union(*(line_words(line) for line in _head(text, 2).split("\n")))


@lru_cache(maxsize=65_536)
def path_words(path: str, folders: int = 0) -> frozenset[str]:
    """Stemmed words of the file name (without its extension) and of its last `folders`
    folders (0: all of them)."""
    trimmed = path.rsplit(".", 1)[0]
    if folders:
        trimmed = "/".join(trimmed.split("/")[-1 - folders :])
    parts = re.split(r"[/._-]", trimmed)
    return frozenset(stem(p) for part in parts for p in (part.lower(), *split_identifier(part)) if p)


@lru_cache(maxsize=65_536)
def line_words(line: str) -> frozenset[str]:
    return frozenset(t for w in re.findall(r"\w+", line) for t in (compound(w), *split_identifier(w)))


def path_factor(c: ChunkView, shape: Query, p: RankingParams = DEFAULT_PARAMS) -> float:
    if shape.name_like and shape.names:
        # a typed name points at the file or folder named after it (`join_set.rs` for `JoinSet`); a
        # file sharing only a part of it (`curl_trc.c` for `curl_msnprintf`) counts for its definer
        # alone (`retry.py` for `retry_with_backoff`), word by whole word
        if named_after(c.path, shape.names):
            return 1 + p.path_weight
        if not defines_queried(c, shape):
            return 1.0
        prefix_min, whole_name = 0, False
    else:
        prefix_min, whole_name = p.path_prefix_min, not shape.name_like
    if not shape.path_terms:
        return 1.0
    matches, named = _path_words(c.path, shape.path_terms, p.path_folders, prefix_min, whole_name)
    factor = 1 + p.path_weight * matches / len(shape.path_terms)
    # a file named for the asked-about thing (`mime.rb` for "MIME type detection") beats a file that
    # shares the word among others (`mime_utils.rb`) or a big file that mentions it
    return factor * (1 + p.path_name_boost) if named else factor


@lru_cache(maxsize=65_536)
def _path_words(path: str, terms: frozenset[str], folders: int, prefix_min: int, whole_name: bool) -> tuple[int, bool]:
    """(how many `terms` the path holds, whether they make up its whole file name): one cached
    call per candidate. Every constant it reads is an argument, so a fit that changes one between
    runs is not served an old answer."""
    return _path_matches(path, terms, folders, prefix_min), whole_name and named_in(path, terms, prefix_min)


@lru_cache(maxsize=65_536)
def named_after(path: str, names: frozenset[str]) -> bool:
    """The file (`SqlMapper.cs`, `requests.rb` for `request`) or its folder is named after one of `names`."""
    return file_named_after(path, names) or compound(folder_of(path).rpartition("/")[2]) in names


def _path_matches(path: str, terms: frozenset[str], folders: int, prefix_min: int) -> int:
    """How many of the query's stems the path's words hold, exactly or (semble's rule) as a
    prefix either way: `lockfile` finds `lock.lua`, `config` finds `configuration.py`;
    `prefix_min` 0: exactly only."""
    words = path_words(path, folders)
    exact = terms & words
    if not prefix_min:
        return len(exact)
    return len(exact) + sum(1 for t in terms - exact if any(_prefixed(t, w, prefix_min) for w in words))


def _prefixed(a: str, b: str, prefix_min: int) -> bool:
    return min(len(a), len(b)) >= prefix_min and (a.startswith(b) or b.startswith(a))


@lru_cache(maxsize=65_536)
def file_name_words(path: str) -> tuple[str, ...]:
    """Stemmed words of the file name without its extension: `HttpRedirect.kt` → (http, redirect)."""
    pieces = [piece for piece in re.split(r"[._-]", file_name(path)) if piece]
    return tuple(stem(word) for piece in pieces for word in (split_identifier(piece) or [piece.lower()]))


def named_in(path: str, terms: frozenset[str], prefix_min: int) -> bool:
    """Every word of the file name is one of `terms`, exactly or as the path rule's prefix."""
    words = file_name_words(path)
    return bool(words) and all(w in terms or any(_prefixed(w, t, prefix_min) for t in terms) for w in words)


def size_factor(c: ChunkView, shape: Query, p: RankingParams = DEFAULT_PARAMS) -> float:
    return p.small_chunk_penalty if c.end_line - c.start_line < p.small_chunk_lines else 1.0


def folder_of(path: str) -> str:
    return path.rpartition("/")[0]


# ---- the signals over a candidate list ---------------------------------------------------------

SIGNALS = ("query-shape", "definition", "evidence", "kind-prior", "signature", "path", "size", "folder", "coherence")
# the per-candidate factors, by signal; `evidence`, `folder` and `coherence` look across candidates
FACTORS: dict[str, Factor] = {
    "definition": definition_factor, "kind-prior": path_prior, "signature": signature_factor, "path": path_factor,
    "size": size_factor,
}
AFTER_EVIDENCE = ("kind-prior", "signature", "path", "size")  # the factors that see evidence's gains


def apply_signals(
    candidates: Sequence[Candidate],
    shape: Query,
    steps: Collection[str],
    evidence: Callable[[], Mapping[int, Sequence[int]]] | None = None,
    fetch: Callable[[Sequence[int]], Mapping[int, ChunkView]] | None = None,
    limit: int | None = None,
    params: RankingParams = DEFAULT_PARAMS,
) -> list[Candidate]:
    """The signals named in `steps`, in SIGNALS order, over fused candidates: the best `limit`
    (default all), best first. The same as calling each signal's function below in turn. See
    rank_chunks, which this runs on the candidates' scores and `why`s."""
    return rank_chunks(candidates, [c.score for c in candidates], [c.why for c in candidates], shape, steps,
                       evidence, fetch, limit, params)


def rank_chunks(
    chunks: Sequence[ChunkView],
    scores: Sequence[float],
    whys: Sequence[Mapping[str, object]],
    shape: Query,
    steps: Collection[str],
    evidence: Callable[[], Mapping[int, Sequence[int]]] | None = None,
    fetch: Callable[[Sequence[int]], Mapping[int, ChunkView]] | None = None,
    limit: int | None = None,
    params: RankingParams = DEFAULT_PARAMS,
) -> list[Candidate]:
    """apply_signals over chunks with their fused scores and `why`s beside them; scores and
    notes stay in lists and only the candidates returned are built, once (this runs on every
    candidate of every query). `evidence` reads the links (see evidence_transfer) only when the
    signal runs: not when the query asks for tests or docs; `fetch` reads the chunks they point
    at that are not candidates yet, which join at score 0."""
    run = _Run(chunks, scores, whys, params)
    if "definition" in steps and shape.names:  # no name asked for: the factor is 1 for every chunk
        run.multiply(shape, [("definition", FACTORS["definition"])])
    if "evidence" in steps and evidence is not None and fetch is not None and not (shape.wants_tests or shape.wants_docs):
        run.transfer_evidence(evidence(), fetch, run.ranked() if "definition" in steps else range(len(run.cands)))
    run.multiply(shape, [(name, FACTORS[name]) for name in AFTER_EVIDENCE if name in steps])
    if "folder" in steps:
        run.lift_folders()
    capped: set[int] = set()
    if "coherence" in steps:
        capped = run.cohere(shape)
    order = run.ranked()
    if capped:  # file_repeat_decay 0: a file's extra chunks after every file's kept ones
        order = [i for i in order if i not in capped] + [i for i in order if i in capped]
    return [run.candidate(i) for i in order[:limit]]


class _Run:
    """Candidates with their scores, `why`s and signal notes as parallel lists, for rank_chunks."""

    def __init__(self, chunks: Sequence[ChunkView], scores: Sequence[float], whys: Sequence[Mapping[str, object]],
                 params: RankingParams) -> None:
        self.p = params
        self.cands = list(chunks)
        self.scores = list(scores)
        self.whys = list(whys)
        self.notes: list[dict[str, object] | None] = [None] * len(self.cands)

    def scale(self, i: int, factor: float, signal: str) -> None:
        if factor != 1.0:
            self.scores[i] = self.scores[i] * factor
            self.note(i, signal, factor)

    def note(self, i: int, signal: str, value: object) -> None:
        notes = self.notes[i]
        if notes is None:
            notes = self.notes[i] = {}
        notes[signal] = value

    def ranked(self) -> list[int]:
        """Indices best score first, ties by chunk id: two stable sorts on C key functions,
        several times faster than one on a (-score, id) tuple built in Python."""
        order = sorted(range(len(self.cands)), key=[c.chunk_id for c in self.cands].__getitem__)
        order.sort(key=self.scores.__getitem__, reverse=True)
        return order

    def candidate(self, i: int) -> Candidate:
        """The candidate with its score and, in `why`, each signal's factor to 3 decimals."""
        c, notes, why = self.cands[i], self.notes[i], self.whys[i]
        if notes is not None:
            why = dict(why)
            for signal, value in notes.items():
                why[signal] = round(value, 3) if type(value) is float else value  # factors; evidence notes are lists
        return Candidate(c.chunk_id, self.scores[i], c.path, c.kind, c.start_line, c.end_line, c.text, c.defines, why,
                         c.mentions, c.spelled)

    def multiply(self, shape: Query, factors: Sequence[tuple[str, Factor]]) -> None:
        if not factors:
            return
        scores, notes, p = self.scores, self.notes, self.p
        for i, c in enumerate(self.cands):
            total = 1.0
            for name, factor in factors:
                f = factor(c, shape, p)
                if f != 1.0:
                    total *= f
                    found = notes[i]
                    if found is None:
                        notes[i] = {name: f}
                    else:
                        found[name] = f
            if total != 1.0:
                scores[i] = scores[i] * total

    def transfer_evidence(
        self, evidence: Mapping[int, Sequence[int]], fetch: Callable[[Sequence[int]], Mapping[int, ChunkView]],
        order: Iterable[int],
    ) -> None:
        """Signal `evidence`, see evidence_transfer; sources are read in `order`."""
        gains: dict[int, float] = defaultdict(float)
        sources: dict[int, list[int]] = defaultdict(list)
        for i in order:
            c = self.cands[i]
            if not is_evidence_source(c):
                continue
            targets = [t for t in evidence.get(c.chunk_id, ()) if t != c.chunk_id]
            for target in targets:
                gains[target] += self.p.evidence_share * self.scores[i] / len(targets)
                sources[target].append(c.chunk_id)
        if not gains:
            return
        present = {c.chunk_id for c in self.cands}
        for c in fetch([t for t in gains if t not in present]).values():
            self.cands.append(c)
            self.scores.append(0.0)
            self.whys.append(_NO_WHY)
            self.notes.append(None)
        for i, c in enumerate(self.cands):
            gain = gains.get(c.chunk_id)
            if gain:
                self.scores[i] = self.scores[i] + gain
                self.note(i, "evidence", sources[c.chunk_id][:3])

    def lift_folders(self) -> None:
        """Signal `folder`, see folder_coherence."""
        best: dict[str, int] = {}  # a file's best chunk: its first in the ranked list
        for i in self.ranked():
            best.setdefault(self.cands[i].path, i)
        folders = {path: folder_of(path) for path in best}
        per_folder: dict[str, float] = defaultdict(float)
        for path, i in best.items():
            per_folder[folders[path]] += self.scores[i]
        support = {path: per_folder[folders[path]] - self.scores[i] for path, i in best.items()}
        most = max(support.values(), default=0.0)
        if most <= 0:
            return
        scale = self.scale
        for path, i in best.items():
            scale(i, 1 + self.p.folder_coherence * support[path] / most, "folder")

    def cohere(self, shape: Query) -> set[int]:
        """Signal `coherence`, see file_coherence; returns the chunks a hard cap (file_repeat_decay
        0) puts after every file's kept ones."""
        cands, scores, p = self.cands, self.scores, self.p
        by_file: dict[str, list[int]] = {}
        for i in self.ranked():
            path = cands[i].path
            members = by_file.get(path)
            if members is None:
                by_file[path] = [i]
            else:
                members.append(i)
        # each file's support (its other chunks' score) against the best-supported file's, as semble
        # scales it: the lift doesn't shrink because many weak candidates from other files came along
        support = {path: sum([scores[i] for i in members[1:]]) if len(members) > 1 else 0.0
                   for path, members in by_file.items()}
        if shape.name_like and shape.names:
            # a typed name lives where it is defined: a file that only uses it, however often, has
            # no support when a file among the candidates defines it
            defining = {c.path for c in self.cands if defines_queried(c, shape)}
            if defining:
                support = {path: s if path in defining else 0.0 for path, s in support.items()}
        most = max(support.values(), default=0.0) or 1.0
        capped: set[int] = set()
        scale = self.scale
        for path, members in by_file.items():
            scale(members[0], 1 + p.coherence * support[path] / most, "coherence")
            if len(members) > p.max_per_file:
                for rank, i in enumerate(members[p.max_per_file:], start=1):
                    if p.file_repeat_decay <= 0:
                        capped.add(i)
                    else:
                        scale(i, p.file_repeat_decay ** rank, "coherence")
        return capped


_ANY_QUERY = parse_query("")  # for the signals that read only the candidates


def definition_boost(candidates: Sequence[Candidate], shape: Query, params: RankingParams = DEFAULT_PARAMS) -> list[Candidate]:
    """Signal `definition`: the chunk that defines a queried name outranks chunks that use it,
    more so in a file named after it (`SqlMapper.cs` over the partial `SqlMapper.CacheInfo.cs`);
    a name typed with a leading capital counts only where it is defined spelled so
    (`Sinatra::Helpers` is `module Helpers`, not `def helpers`)."""
    return apply_signals(candidates, shape, ("definition",), params=params)


def evidence_transfer(
    candidates: Sequence[Candidate],
    shape: Query,
    evidence: Mapping[int, Sequence[int]],
    fetch: Callable[[Sequence[int]], Mapping[int, ChunkView]],
    params: RankingParams = DEFAULT_PARAMS,
) -> list[Candidate]:
    """Signal `evidence`: a matching test, example or doc chunk passes `evidence_share` of its score,
    split evenly, to the code chunks it calls or names (`evidence`: source chunk id → target chunk
    ids). Targets not yet among the candidates join them. Runs before `kind-prior`, which then
    puts the evidence below the code it points at."""
    return apply_signals(candidates, shape, ("evidence",), lambda: evidence, fetch, params=params)


def kind_prior(candidates: Sequence[Candidate], shape: Query, params: RankingParams = DEFAULT_PARAMS) -> list[Candidate]:
    """Signal `kind-prior`: tests, docs, examples, vendored code, re-export files and stubs
    step back unless the query asks for them."""
    return apply_signals(candidates, shape, ("kind-prior",), params=params)


def signature_weight(candidates: Sequence[Candidate], shape: Query, params: RankingParams = DEFAULT_PARAMS) -> list[Candidate]:
    """Signal `signature`: query words in a symbol chunk's name and signature count extra."""
    return apply_signals(candidates, shape, ("signature",), params=params)


def path_match(candidates: Sequence[Candidate], shape: Query, params: RankingParams = DEFAULT_PARAMS) -> list[Candidate]:
    """Signal `path`: query words in the file's path (its name and folder) point at the file, more
    so when they make up the whole file name (`mime.rb` for "MIME type detection"); an identifier
    points at the file or folder named after it."""
    return apply_signals(candidates, shape, ("path",), params=params)


def size_prior(candidates: Sequence[Candidate], shape: Query, params: RankingParams = DEFAULT_PARAMS) -> list[Candidate]:
    """Signal `size`: a chunk of a few lines steps back; BM25's length normalisation and the
    signature signal favour a three-line getter that happens to hold two of the query's words."""
    return apply_signals(candidates, shape, ("size",), params=params)


def folder_coherence(candidates: Sequence[Candidate], params: RankingParams = DEFAULT_PARAMS) -> list[Candidate]:
    """Signal `folder`: good candidates from other files of the same folder lift a file's best
    chunk (a question about a subsystem points at the folder that holds it: `Queue/`,
    `task/`), against the best-supported file's folder support as `coherence` scales its own."""
    return apply_signals(candidates, _ANY_QUERY, ("folder",), params=params)


def file_coherence(
    candidates: Sequence[Candidate], shape: Query = _ANY_QUERY, params: RankingParams = DEFAULT_PARAMS
) -> list[Candidate]:
    """Signal `coherence`: several good chunks in a file lift its best one; a file's further
    chunks step back (`file_repeat_decay` each) so one file can't fill the page. For an identifier,
    only files that define it are lifted when any does: the many chunks of a file that uses a name
    say where it is used, not where it lives."""
    return apply_signals(candidates, shape, ("coherence",), params=params)
