"""Code-aware ranking signals: small pure functions over a fused candidate list.

Each signal takes the candidates and the query's shape and returns them rescored, recording its
name and effect in each changed candidate's `why`. None touches the database: the engine gathers
the facts (kind, path, defined names, evidence links) first. Every constant lives here.

Constants were fitted on a development split of semble's benchmark (httpx, starlette, cobra,
axios, redux, sinatra) and are reported on other repositories; see BENCHMARKS.md.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from codewhere.tokens import (
    compound,
    is_identifier_query,
    query_terms,
    split_identifier,
)
from codewhere.types import FileKind

# ---- constants (one place; see the module docstring for how they were chosen) ----------------

CANDIDATES = 50  # fused candidates the signals re-rank
SEMANTIC_WEIGHT_FOR_IDENTIFIERS = 0.5  # query shape: an identifier is found by name, not by meaning
DEFINITION_BOOST = 1.0  # × (1 + boost) for a chunk that defines a queried name
TEST_PENALTY = 0.3  # × for tests, unless the query asks about tests
DOCS_PENALTY = 0.3  # × for documentation, unless the query asks about docs
CONFIG_PENALTY = 0.5  # × for configuration files (CI, manifests, settings)
EXAMPLE_PENALTY = 0.5  # × for examples, benchmarks, vendored or compat code
REEXPORT_PENALTY = 0.5  # × for __init__.py / index.ts chunks that only import and re-export
STUB_PENALTY = 0.5  # × for .d.ts and .pyi declaration stubs
EVIDENCE_SHARE = 0.5  # share of a test/doc chunk's score passed to the code it calls or names
COHERENCE = 0.6  # × (1 + coherence × other chunks' share) for a file's best chunk
MAX_PER_FILE = 1  # chunks of one file at full score; each further one is multiplied by FILE_REPEAT_DECAY
FILE_REPEAT_DECAY = 0.3  # 0 pushes a file's extra chunks below every other file's (a hard cap)
SIGNATURE_WEIGHT = 0.5  # × (1 + weight × share of query terms in the symbol's name and signature)
PATH_WEIGHT = 1.0  # × (1 + weight × share of query terms in the file's path: `join_set.rs`, `websockets.py`)

TEST_WORDS = frozenset({"test", "tests", "testing", "spec", "specs", "fixture", "fixtures", "mock", "mocks"})
# "documentation" is left out on purpose: "documentation generation" asks for the code that generates it
DOCS_WORDS = frozenset({"readme", "guide", "tutorial", "changelog", "docs"})
EXAMPLE_PATH = re.compile(r"(^|/)(examples?|samples?|demos?|benchmarks?|bench|vendor|vendored|third_party|thirdparty|compat|_compat)(/|$)", re.I)
_REEXPORT_FILE = re.compile(r"(^|/)(__init__\.py|index\.[cm]?[jt]sx?|mod\.rs)$")
_STUB_FILE = re.compile(r"\.(d\.ts|pyi)$")
_REEXPORT_LINE = re.compile(r"^\s*(from\s+\S+\s+import|import\s|export\s+(\*|\{)|pub\s+use\s|__all__|\)|[\w\s,]*,\s*$|#|$)")


@dataclass(frozen=True)
class QueryShape:
    terms: tuple[str, ...]
    names: frozenset[str]  # compound names the query asks for (`raise_for_status`, `Router`)
    identifier: bool
    wants_tests: bool
    wants_docs: bool


def query_shape(query: str) -> QueryShape:
    terms = tuple(query_terms(query))
    words = [w.lower() for w in re.findall(r"\w+", query)]
    identifier = is_identifier_query(query) or (len(query.split()) == 1 and len(query.strip()) > 2)
    names = {compound(tok) for tok in re.split(r"[\s,;]+", query) if tok and _looks_like_code(tok, len(words) == 1)}
    names |= {compound(re.split(r"::|\.|->|#", tok.removesuffix("()"))[-1]) for tok in query.split() if _looks_like_code(tok, len(words) == 1)}
    return QueryShape(
        terms, frozenset(n for n in names if n), identifier,
        bool(TEST_WORDS & set(words)), bool(DOCS_WORDS & set(words)),
    )


def _looks_like_code(token: str, alone: bool) -> bool:
    token = token.strip("`'\"")
    if not re.fullmatch(r"[A-Za-z_$][\w$.:#>-]*(\(\))?", token):
        return False
    return alone or bool(re.search(r"_|[a-z][A-Z]|::|\.\w|\(\)|^[A-Z][a-z]+[A-Z]", token))


@dataclass(frozen=True)
class Candidate:
    chunk_id: int
    score: float
    path: str
    kind: FileKind
    start_line: int
    text_head: str  # the first lines: a symbol chunk's signature
    defines: tuple[str, ...]  # compound names the chunk defines
    why: Mapping[str, object] = field(default_factory=dict)

    def rescored(self, factor: float, signal: str) -> Candidate:
        if factor == 1.0:
            return self
        # the constructor, not dataclasses.replace: this runs for every candidate and signal of every query
        return Candidate(self.chunk_id, self.score * factor, self.path, self.kind, self.start_line, self.text_head,
                         self.defines, {**self.why, signal: round(factor, 3)})


def ordered(candidates: Sequence[Candidate]) -> list[Candidate]:
    return sorted(candidates, key=lambda c: (-c.score, c.chunk_id))


# ---- signals ---------------------------------------------------------------------------------


def fusion_weights(shape: QueryShape) -> dict[str, float]:
    """Signal `query-shape`: identifiers lean on keyword and name lists, prose stays balanced."""
    if shape.identifier:
        return {"keyword": 1.0, "names": 1.0, "semantic": SEMANTIC_WEIGHT_FOR_IDENTIFIERS}
    return {"keyword": 1.0, "names": 1.0, "semantic": 1.0}


def definition_boost(candidates: Sequence[Candidate], shape: QueryShape) -> list[Candidate]:
    """Signal `definition`: the chunk that defines a queried name outranks chunks that use it."""
    if not shape.names:
        return list(candidates)
    return ordered([
        c.rescored(1 + DEFINITION_BOOST, "definition") if shape.names & set(c.defines) else c for c in candidates
    ])


def is_reexport(c: Candidate) -> bool:
    if not _REEXPORT_FILE.search(c.path):
        return False
    lines = [line for line in c.text_head.split("\n") if line.strip()]
    return bool(lines) and sum(1 for line in lines if _REEXPORT_LINE.match(line)) >= 0.8 * len(lines)


def path_prior(c: Candidate, shape: QueryShape) -> float:
    factor = 1.0
    if c.kind is FileKind.TEST and not shape.wants_tests:
        factor *= TEST_PENALTY
    elif c.kind is FileKind.DOCS and not shape.wants_docs:
        factor *= DOCS_PENALTY
    elif c.kind is FileKind.CONFIG:
        factor *= CONFIG_PENALTY
    if EXAMPLE_PATH.search(c.path) and not shape.wants_tests:
        factor *= EXAMPLE_PENALTY
    if _STUB_FILE.search(c.path):
        factor *= STUB_PENALTY
    elif is_reexport(c):
        factor *= REEXPORT_PENALTY
    return factor


def kind_prior(candidates: Sequence[Candidate], shape: QueryShape) -> list[Candidate]:
    """Signal `kind-prior`: tests, docs, examples, vendored code, re-export files and stubs
    step back unless the query asks for them."""
    return ordered([c.rescored(path_prior(c, shape), "kind-prior") for c in candidates])


def evidence_transfer(
    candidates: Sequence[Candidate],
    shape: QueryShape,
    evidence: Mapping[int, Sequence[int]],
    fetch: Callable[[Sequence[int]], Mapping[int, Candidate]],
) -> list[Candidate]:
    """Signal `evidence`: a matching test, example or doc chunk passes EVIDENCE_SHARE of its score,
    split evenly, to the code chunks it calls or names (`evidence`: source chunk id → target chunk
    ids). Targets not yet among the candidates join them. Run before `kind-prior`, which then
    puts the evidence below the code it points at."""
    if shape.wants_tests or shape.wants_docs:
        return list(candidates)
    gains: dict[int, float] = defaultdict(float)
    sources: dict[int, list[int]] = defaultdict(list)
    for c in candidates:
        if c.kind not in (FileKind.TEST, FileKind.DOCS) and not EXAMPLE_PATH.search(c.path):
            continue
        targets = [t for t in evidence.get(c.chunk_id, ()) if t != c.chunk_id]
        for target in targets:
            gains[target] += EVIDENCE_SHARE * c.score / len(targets)
            sources[target].append(c.chunk_id)
    if not gains:
        return list(candidates)
    present = {c.chunk_id for c in candidates}
    joined = fetch([t for t in gains if t not in present])
    out = []
    for c in [*candidates, *joined.values()]:
        gain = gains.get(c.chunk_id)
        if gain:
            c = replace(c, score=c.score + gain, why={**c.why, "evidence": sources[c.chunk_id][:3]})
        out.append(c)
    return ordered(out)


def signature_weight(candidates: Sequence[Candidate], shape: QueryShape) -> list[Candidate]:
    """Signal `signature`: query words in a symbol chunk's name and signature count extra."""
    terms = set(shape.terms)
    if not terms:
        return list(candidates)
    out = []
    for c in candidates:
        if not c.defines:
            out.append(c)
            continue
        head = c.text_head.split("\n", 2)
        words = line_words(head[0]) | (line_words(head[1]) if len(head) > 1 else frozenset())
        share = len(terms & words) / len(terms)
        out.append(c.rescored(1 + SIGNATURE_WEIGHT * share, "signature"))
    return ordered(out)


_SUFFIXES = ("ing", "ers", "ies", "ed", "es", "er", "s")


def stem(word: str) -> str:
    """A crude English stem, enough to match `websocket`/`websockets`, `spawned`/`spawn`."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=65_536)
def path_words(path: str) -> frozenset[str]:
    """Stemmed words of a path's folders and file name, without the extension."""
    parts = re.split(r"[/._-]", path.rsplit(".", 1)[0])
    return frozenset(stem(p) for part in parts for p in (part.lower(), *split_identifier(part)) if p)


@lru_cache(maxsize=65_536)
def line_words(line: str) -> frozenset[str]:
    return frozenset(t for w in re.findall(r"\w+", line) for t in (compound(w), *split_identifier(w)))


def path_match(candidates: Sequence[Candidate], shape: QueryShape) -> list[Candidate]:
    """Signal `path`: query words in the file's path (folders and name) point at the file."""
    terms = {stem(t) for t in shape.terms if len(t) > 2}
    if not terms:
        return list(candidates)
    out = []
    for c in candidates:
        share = len(terms & path_words(c.path)) / len(terms)
        out.append(c.rescored(1 + PATH_WEIGHT * share, "path"))
    return ordered(out)


def file_coherence(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Signal `coherence`: several good chunks in a file lift its best one; a file's further
    chunks step back (FILE_REPEAT_DECAY each) so one file can't fill the page."""
    by_file: dict[str, list[Candidate]] = defaultdict(list)
    for c in ordered(candidates):
        by_file[c.path].append(c)
    total = sum(c.score for c in candidates) or 1.0
    lifted = []
    for chunks in by_file.values():
        best, rest = chunks[0], chunks[1:]
        share = sum(c.score for c in rest) / total
        lifted.append(best.rescored(1 + COHERENCE * share, "coherence"))
        lifted.extend(rest)
    ranked = ordered(lifted)
    if FILE_REPEAT_DECAY <= 0:
        kept, pushed, seen = [], [], defaultdict(int)
        for c in ranked:
            seen[c.path] += 1
            (kept if seen[c.path] <= MAX_PER_FILE else pushed).append(c)
        return kept + pushed
    decayed, seen = [], defaultdict(int)
    for c in ranked:
        seen[c.path] += 1
        extra = seen[c.path] - MAX_PER_FILE
        decayed.append(c.rescored(FILE_REPEAT_DECAY ** extra, "coherence") if extra > 0 else c)
    return ordered(decayed)


SIGNALS = ("query-shape", "definition", "evidence", "kind-prior", "signature", "path", "coherence")
