"""Signal `kind-prior`: tests, docs, examples, vendored code, re-export files, stubs, generated code
and translation catalogs step back unless the query asks for them."""

from __future__ import annotations

import re
from functools import lru_cache

from codewhere.languages import TRANSLATION_CATALOGS
from codewhere.search.params import RankingParams
from codewhere.search.query import Query
from codewhere.search.ranking.words import head
from codewhere.types import ChunkRow, FileKind

EXAMPLE_PATH = re.compile(r"(^|/)(examples?|samples?|demos?|benchmarks?|bench|vendor|vendored|third_party|thirdparty|compat|_compat)(/|$)", re.IGNORECASE)
_REEXPORT_FILE = re.compile(r"(^|/)(__init__\.py|index\.[cm]?[jt]sx?|mod\.rs)$")
_STUB_FILE = re.compile(r"\.(d\.ts|pyi)$")
# code a tool wrote from a schema (protobuf, gRPC, Flutter's build_runner): it names every message
# and field of the schema, so a question's words match it before the code that uses them
_GENERATED_FILE = re.compile(r"(_pb2(_grpc)?\.pyi?|\.pb\.(go|cc|h)|\.pb\.gw\.go|_grpc\.pb\.go|\.g\.dart|\.freezed\.dart|_generated\.(go|rs|ts|py))$")
REEXPORT_LINES = 20  # a re-export file shows itself in its first lines
_REEXPORT_LINE = re.compile(r"^\s*(from\s+\S+\s+import|import\s|export\s+(\*|\{)|pub\s+use\s|__all__|\)|[\w\s,]*,\s*$|#|$)")
# module names for the kinds tested per candidate: cheaper than an Enum attribute each time
_TEST, _DOCS, _CONFIG = FileKind.TEST, FileKind.DOCS, FileKind.CONFIG


@lru_cache(maxsize=4096)
def _only_reexports(text: str) -> bool:
    lines = [line for line in head(text, REEXPORT_LINES).split("\n") if line.strip()]
    return bool(lines) and sum(1 for line in lines if _REEXPORT_LINE.match(line)) >= 0.8 * len(lines)


@lru_cache(maxsize=65_536)
def _path_flags(path: str) -> tuple[bool, bool, bool, bool, bool]:
    """(example or vendored code, declaration stub, re-export file name, generated code, translation
    catalog) of a path."""
    return (bool(EXAMPLE_PATH.search(path)), bool(_STUB_FILE.search(path)), bool(_REEXPORT_FILE.search(path)),
            # a translation catalog repeats every user-facing string of the code, once per language:
            # a question quoting a message finds a dozen catalogs before the code that shows it
            bool(_GENERATED_FILE.search(path)), path.lower().endswith(TRANSLATION_CATALOGS))


def kind_factor(c: ChunkRow, query: Query, p: RankingParams) -> float:
    factor = 1.0
    kind = c.kind
    if kind is _TEST and not query.wants_tests:
        factor *= p.test_penalty
    elif kind is _DOCS and not query.wants_docs:
        factor *= p.docs_penalty
    elif kind is _CONFIG:
        factor *= p.config_penalty
    example, stub, reexport_name, generated, catalog = _path_flags(c.path)
    if example and not query.wants_tests:
        factor *= p.example_penalty
    if stub:
        factor *= p.stub_penalty
    elif reexport_name and _only_reexports(c.text):
        factor *= p.reexport_penalty
    if generated:
        factor *= p.generated_penalty
    if catalog and not query.wants_translations:
        factor *= p.catalog_penalty
    return factor


def is_evidence_source(c: ChunkRow) -> bool:
    """Tests, examples and docs describe code in a user's words; evidence flows from them."""
    return c.kind is _TEST or c.kind is _DOCS or _path_flags(c.path)[0]
