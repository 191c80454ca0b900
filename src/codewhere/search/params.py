"""Every fitted number of the ranking, declared once: a frozen RankingParams with defaults.

The defaults were fitted on the development split of semble's benchmark (27 repositories,
benchmarks/splits.py, with benchmarks/fit_signals.py) and are reported on the other 22; see
BENCHMARKS.md. A fit or an experiment makes another set (`replace`, or a TOML file with a
`[ranking]` table) and hands it to the search; nothing is changed in place.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from codewhere.errors import QueryError


@dataclass(frozen=True)
class RankingParams:
    candidates: int = 50  # fused candidates the signals re-rank
    semantic_weight_for_identifiers: float = 0.5  # query shape: an identifier is found by name, not by meaning ...
    names_weight_for_identifiers: float = 3.0  # ... and first where it is defined: the definers' list outweighs BM25's
    # a question in words: how much the vector list and BM25's weigh (a model that knows what words
    # mean in context earns more than one whose vectors are a bag of token vectors)
    semantic_weight_for_prose: float = 1.0
    keyword_weight_for_prose: float = 1.0
    definition_boost: float = 0.8  # × (1 + boost) for a chunk that defines a queried name
    definition_file_boost: float = 0.5  # × (1 + boost) more when its file is named after it (`SqlMapper.cs`, `request.rb`)
    test_penalty: float = 0.2  # × for tests, unless the query asks about tests
    docs_penalty: float = 0.3  # × for documentation, unless the query asks about docs
    config_penalty: float = 0.3  # × for configuration files (CI, manifests, settings)
    example_penalty: float = 0.5  # × for examples, benchmarks, vendored or compat code
    reexport_penalty: float = 0.5  # × for __init__.py / index.ts chunks that only import and re-export
    stub_penalty: float = 0.5  # × for .d.ts and .pyi declaration stubs
    generated_penalty: float = 0.5  # × for generated code by its name (`*_pb2.py`, `*.pb.go`, `*.g.dart`)
    catalog_penalty: float = 0.3  # × more for translation catalogs (config already), unless the query asks about translations
    evidence_share: float = 0.25  # share of a test/doc chunk's score passed to the code it calls or names
    # how much of that share a call passes by how its target was found (graph.CONFIDENCE): a
    # precise or imported target passes it all, a guess by name alone (same-file, unique) this much
    evidence_guess_weight: float = 1.0
    evidence_min_gain: float = 0.05  # a target not among the candidates joins only with a gain of this × the best score
    folder_coherence: float = 1.0  # × (1 + weight × the other files' best scores in its folder / the best-supported folder's)
    coherence: float = 1.5  # × (1 + coherence × its other chunks' score / the best-supported file's) for a file's best chunk
    max_per_file: int = 1  # chunks of one file at full score; each further one is multiplied by file_repeat_decay
    file_repeat_decay: float = 0.15  # 0 pushes a file's extra chunks below every other file's (a hard cap)
    file_words_weight: float = 1.5  # file-words: × (1 + weight × the file's BM25 as one document / the best file's)
    file_words_depth: int = 100  # ... over the best this many files
    anonymous_chunk_factor: float = 0.5  # function: × a chunk of no definition (imports, doc comments between functions), in its file's order
    function_keyword_depth: int = 100  # function: the keyword list is read this deep for the BM25 scores of a file's chunks ...
    function_length_exponent: float = 0.1  # ... each × its definition's lines to this power
    # ... and × (1 + weight × k / (k + its rank in the vector list, read this deep)): a question in
    # words ranks a file's functions by its words alone otherwise (README's example put the docstring
    # naming `no_proxy` above the function that skips the proxy). 0: words alone. With the default
    # model trained on code, 1 and 2 were tried on dev (function top 5 0.407 -> 0.412 / 0.409, within
    # the noise) and 1 lost on the reported split (0.408 -> 0.390): kept at 0 (BENCHMARKS.md §2)
    function_semantic_weight: float = 0.0
    function_semantic_k: int = 10
    function_semantic_depth: int = 100
    # function: when the question's words stand out in one file (the second file's whole-file BM25
    # below `function_runner_up_when` × the first's), the first ranked file's second definition is
    # placed at least at its first's score × this × its match / the first's match (0: never;
    # `file-words` off, no file scores: never)
    function_runner_up: float = 0.5
    function_runner_up_when: float = 0.8
    signature_weight: float = 0.4  # × (1 + weight × share of query terms in the symbol's name and signature)
    small_chunk_lines: int = 10  # chunks of at most this many lines (getters, one-line declarations) ...
    small_chunk_penalty: float = 0.7  # ... × this: they match a question's words by density, not by substance
    path_weight: float = 4.0  # × (1 + weight × share of query terms in the file's path: `join_set.rs`, `websockets.py`)
    path_name_boost: float = 0.5  # × (1 + boost) more when a question's words make up the whole file name (`mime.rb`, `HttpRedirect.kt`)
    misspelled_definition_share: float = 0.0  # of the boost, for a definer that doesn't define a capitalised name as typed
    path_folders: int = 1  # the path signal reads the file name and this many folders above it (0: all)
    path_prefix_min: int = 3  # path and query words match when one starts the other, both this long (`lock`, `lockfile`)
    keyword_path_weight: float = 0.5  # BM25 (ts_rank on PostgreSQL): a query word in the file path, which every chunk of the file repeats ...
    keyword_text_weight: float = 1.0  # ... against one in its text
    rrf_k: int = 60  # Reciprocal Rank Fusion's k: each list adds weight / (k + rank)
    rrf_depth: int = 30  # each retriever contributes its top this many

    def with_values(self, values: dict[str, Any]) -> RankingParams:
        """A copy with some values changed, by field name (any case: `PATH_WEIGHT` or `path_weight`);
        each value is converted to its field's type, an unknown name is refused."""
        known = {f.name: f for f in fields(self)}
        changed: dict[str, Any] = {}
        for name, value in values.items():
            field = known.get(name.lower())
            if field is None:
                raise QueryError(f"no ranking parameter {name!r}", f"use one of: {', '.join(sorted(known))}")
            try:
                changed[field.name] = int(value) if field.type in ("int", int) else float(value)
            except (TypeError, ValueError) as exc:
                raise QueryError(f"ranking parameter {name} must be a number, got {value!r}", "fix the value") from exc
        return replace(self, **changed)

    @classmethod
    def from_toml(cls, path: Path) -> RankingParams:
        """Defaults overridden by the `[ranking]` table of a TOML file."""
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8")).get("ranking", {})
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise QueryError(f"cannot read ranking parameters from {path}: {exc}", "give a TOML file with a [ranking] table") from exc
        return cls().with_values(dict(table))


DEFAULT_PARAMS = RankingParams()
