from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import pytest

from codewhere.search import engine, ranking
from codewhere.search.fuse import rrf
from codewhere.search.params import DEFAULT_PARAMS as P
from codewhere.search.params import RankingParams
from codewhere.search.query import parse_query
from codewhere.search.ranking import fusion_weights, is_evidence_source
from codewhere.search.ranking.path import named_in, path_factor
from codewhere.search.ranking.size import size_factor
from codewhere.search.ranking.words import file_named_after
from codewhere.tokens import compound
from codewhere.types import ChunkRow, FileKind, Filters, Ranked, Unit

ANY_QUERY = parse_query("")  # for the signals that read only the candidates


def cand(cid: int, score: float, path: str = "src/a.py", kind: FileKind = FileKind.CODE, head: str = "",
         defines: tuple[str, ...] = (), why: Mapping[str, object] | None = None, unit: str | None = None,
         unit_lines: int = 6) -> Ranked:
    """A fused candidate. `defines`: names as written, as the store keeps them beside their compound form;
    `unit`: the name of the definition it belongs to (none: a chunk of no definition), `unit_lines` long."""
    lines = head.count("\n") + (0 if head.endswith("\n") else 1)
    row = ChunkRow(cid, path, 1, lines, kind, "python", head, "", tuple(compound(n) for n in defines), spelled=defines,
                   unit=None if unit is None else Unit(100 * cid, 100 * cid + unit_lines - 1, unit))
    return Ranked(cid, score, why or {}, row)


Links = Mapping[int, Sequence[int] | Mapping[int, float]]


def run(candidates: Sequence[Ranked], query: str | object, *signals: str, params: RankingParams = P,
        evidence: Links | Callable[[], Links] | None = None,
        fetch: Callable[[Sequence[int]], Mapping[int, Ranked]] | None = None, limit: int | None = None,
        keyword: Mapping[int, float] | None = None, files: Mapping[tuple[str, str], float] | None = None) -> list[Ranked]:
    """ranking.rank over candidates (or an earlier ranking's output) with the named signals;
    evidence targets given as a list weigh 1 each; `keyword`: BM25 scores by chunk id; `files`:
    whole files' BM25 scores by (repository, path)."""
    shape = parse_query(query) if isinstance(query, str) else query
    read = evidence if callable(evidence) or evidence is None else (lambda: evidence)
    links = None if read is None else (lambda: {s: t if isinstance(t, Mapping) else dict.fromkeys(t, 1.0)
                                                for s, t in read().items()})
    rows = None if fetch is None else (lambda wanted: {cid: c.row for cid, c in fetch(wanted).items()})
    return ranking.rank([c.row for c in candidates], [c.score for c in candidates], [c.why for c in candidates], shape,
                        signals, params, links, rows, limit, keyword, files)


def path_of(c: Ranked, query: object, params: RankingParams = P) -> float:
    return path_factor(c.row, query, params)  # type: ignore[arg-type]


def size_of(c: Ranked, query: object, params: RankingParams = P) -> float:
    return size_factor(c.row, query, params)  # type: ignore[arg-type]


def ids(candidates: list[Ranked]) -> list[int]:
    return [c.chunk_id for c in candidates]


def test_parse_query() -> None:
    assert parse_query("raise_for_status").name_like and parse_query("raise_for_status").names == {"raiseforstatus"}
    assert parse_query("Router").names == {"router"}  # one word is a name
    assert parse_query("Session.resolve_redirects").names >= {"resolveredirects"}
    prose = parse_query("how are redirects followed")
    assert not prose.name_like and not prose.names
    assert parse_query("tests for the redirect loop").wants_tests
    assert parse_query("where does parseHeaders split lines").names == {"parseheaders"}


def test_fusion_weights_lean_on_names_for_identifiers() -> None:
    assert fusion_weights(parse_query("getUserById"), P)["semantic"] < 1.0
    assert fusion_weights(parse_query("how users are loaded"), P)["semantic"] == 1.0
    # a chunk that uses the name tops both text lists; the one that defines it is only in the
    # definers' list: for an identifier the definer wins, for prose the user
    user, definer = 1, 2
    lists = {"keyword": [user], "semantic": [user], "names": [definer]}
    assert [cid for cid, _, _ in rrf(lists, weights=fusion_weights(parse_query("getUserById"), P))] == [definer, user]
    assert [cid for cid, _, _ in rrf(lists, weights=fusion_weights(parse_query("how users are loaded"), P))] == [user, definer]


def test_definition_boost_puts_the_definer_first() -> None:
    user = cand(1, 0.030, defines=("run",))
    definer = cand(2, 0.025, defines=("retry_with_backoff",))
    out = run([user, definer], "retry_with_backoff", "definition")
    assert ids(out) == [2, 1] and out[0].why["definition"] == 1 + P.definition_boost
    assert ids(run([user, definer], "how retries work", "definition")) == [1, 2]


def test_definition_boost_prefers_the_file_named_after_the_symbol() -> None:
    head = "public static partial class SqlMapper\n{"
    partial = cand(1, 0.030, "Dapper/SqlMapper.CacheInfo.cs", head=head, defines=("SqlMapper",))
    home = cand(2, 0.025, "Dapper/SqlMapper.cs", head=head, defines=("SqlMapper",))
    user = cand(3, 0.040, "Dapper/Other.cs")
    out = run([partial, home, user], "SqlMapper", "definition")
    assert ids(out) == [2, 1, 3]
    assert out[0].why["definition"] == pytest.approx((1 + P.definition_boost) * (1 + P.definition_file_boost))
    assert file_named_after("lib/rack/requests.rb", frozenset({"request"}))  # plural file name
    assert file_named_after("src/retry_policy.py", frozenset({"retrypolicy"}))
    assert not file_named_after("src/retry_policy.py", frozenset({"retry"}))


def test_a_name_typed_with_a_capital_is_defined_only_where_it_is_spelled_so() -> None:
    method = cand(1, 0.030, "lib/sinatra/base.rb", head="    def helpers\n      @instance\n", defines=("helpers",))
    module = cand(2, 0.025, "lib/sinatra/base.rb", head="  # routes\n  module Helpers\n", defines=("Helpers",))
    out = run([method, module], "Sinatra::Helpers", "definition")
    assert ids(out) == [2, 1] and "definition" not in out[1].why
    # typed in lowercase, the case says nothing: both are definers
    out = run([method, module], "helpers", "definition")
    assert ids(out) == [1, 2] and out[0].why["definition"] == out[1].why["definition"] == 1 + P.definition_boost
    assert parse_query("Sinatra::Helpers").capitalised == {"Helpers"} and not parse_query("helpers").capitalised
    assert not parse_query("where does parseHeaders split lines").capitalised  # its capital only separates words
    # the name must be defined spelled so, not merely appear in the chunk: `let dispatch: Dispatch = …`
    variable = cand(3, 0.030, "src/applyMiddleware.ts", head="let dispatch: Dispatch = () => {", defines=("dispatch",))
    type_ = cand(4, 0.025, "src/types/store.ts", head="export interface Dispatch<A> {", defines=("Dispatch",))
    out = run([variable, type_], "Dispatch", "definition")
    assert ids(out) == [4, 3] and "definition" not in out[1].why


def test_path_signal_reads_the_file_name_and_its_folder() -> None:
    far = cand(1, 0.020, "src/scheduler/a/b/util.rs")  # the word sits three folders up
    near = cand(2, 0.015, "src/net/scheduler.rs")
    out = run([far, near], "how the scheduler works", "path")
    assert ids(out) == [2, 1] and "path" not in out[1].why
    assert out[0].why["path"] > 1


def test_path_signal_matches_a_word_that_starts_another() -> None:
    other = cand(1, 0.020, "lua/lazy/core/plugin.lua")
    lock = cand(2, 0.015, "lua/lazy/manage/lock.lua")
    out = run([other, lock], "how the lockfile pins commits", "path")
    assert ids(out) == [2, 1] and out[0].why["path"] > 1 and "path" not in out[1].why
    shape = parse_query("lockfile")
    assert path_of(cand(3, 0.01, "src/lo.py"), shape) == 1.0  # too short to count as a prefix
    assert path_of(cand(4, 0.01, "src/configuration.py"), parse_query("config loading")) > 1.0


def test_path_signal_prefers_a_file_named_wholly_in_the_questions_words() -> None:
    # both paths hold `mime`, one of the question's three words; only one is named for it alone
    utils = cand(1, 0.020, "lib/rack/mime_utils.rb")
    mime = cand(2, 0.018, "lib/rack/mime.rb")
    shape = parse_query("MIME type detection")
    out = run([utils, mime], shape, "path")
    assert ids(out) == [2, 1]
    assert path_of(mime, shape) == pytest.approx(path_of(utils, shape) * (1 + P.path_name_boost))
    # camel case and the path rule's prefixes: `HttpRedirect` is `http` + `redirect`, "redirects" finds it
    prefix = P.path_prefix_min
    assert named_in("ktor/plugins/HttpRedirect.kt", parse_query("how HTTP redirects are followed").path_terms, prefix)
    assert not named_in("ktor/plugins/HttpRedirect.kt", parse_query("how redirects are followed").path_terms, prefix)
    # an identifier has its own rule (named after it), which this does not add to
    assert path_of(cand(3, 0.01, "lib/rack/mime.rb"), parse_query("mime")) == 1 + P.path_weight


def test_the_whole_file_name_rule_leaves_identifiers_alone() -> None:
    # `retry.py` is named wholly in the words of `retry_with_backoff`, and its chunk defines the name:
    # the path rule for identifiers (whole words, for the definer) decides, the boost does not
    definer = cand(1, 0.01, "src/retry.py", defines=("retry_with_backoff",))
    identifier, prose = parse_query("retry_with_backoff"), parse_query("retry failed requests")
    prefix = P.path_prefix_min
    assert named_in(definer.row.path, identifier.path_terms, prefix) and named_in(definer.row.path, prose.path_terms, prefix)
    before = path_of(definer, identifier), path_of(definer, prose)
    bigger = P.with_values({"path_name_boost": P.path_name_boost + 1})
    assert path_of(definer, identifier, bigger) == before[0]
    assert path_of(definer, prose, bigger) > before[1]


def test_path_parameters_of_another_set_take_effect_at_once() -> None:
    # fit_signals.py tries parameter sets one after another in one process: the path signal's
    # caches must not answer with the old ones
    shape = parse_query("how redirects are followed")
    deep = cand(1, 0.01, "src/redirects/rules/policy.py")  # the word two folders above the file
    short = cand(2, 0.01, "src/redir.py")  # `redir` starts `redirect`: the prefix rule
    first = P.with_values({"path_folders": 1, "path_prefix_min": 3})
    assert path_of(deep, shape, first) == 1.0
    assert path_of(short, shape, first) > 1.0
    second = P.with_values({"PATH_FOLDERS": 0, "PATH_PREFIX_MIN": 6})  # every folder
    assert path_of(deep, shape, second) > 1.0
    assert path_of(short, shape, second) == 1.0


def test_path_signal_takes_only_a_file_or_folder_named_after_an_identifier() -> None:
    folder = cand(1, 0.01, "fastapi/dependencies/utils.py")
    named = cand(2, 0.01, "fastapi/depends.py")
    assert path_of(folder, parse_query("Depends")) == 1.0  # `depend` only starts `dependencies`
    assert path_of(named, parse_query("Depends")) == 1 + P.path_weight
    assert path_of(folder, parse_query("what a route depends on")) > 1.0  # prose keeps the prefix rule
    # a file sharing a part of the name is not named after it; a file or folder spelled so is
    assert path_of(cand(3, 0.01, "lib/curl_trc.c"), parse_query("curl_msnprintf")) == 1.0
    assert path_of(cand(4, 0.01, "lib/easy.c"), parse_query("Curl_easy")) == 1.0
    assert path_of(cand(5, 0.01, "tokio/src/task/join_set.rs"), parse_query("JoinSet")) > 1.0
    assert path_of(cand(6, 0.01, "tokio/src/sync/mpsc/mod.rs"), parse_query("mpsc")) > 1.0
    assert path_of(cand(7, 0.01, "lib/rack/builder.rb"), parse_query("Rack::Builder")) > 1.0
    # a file sharing a part of the name still counts for the name's definer, by whole words
    definer = cand(8, 0.01, "src/retry.py", defines=("retry_with_backoff",))
    assert path_of(definer, parse_query("retry_with_backoff")) > 1.0
    assert path_of(cand(9, 0.01, "src/retry.py"), parse_query("retry_with_backoff")) == 1.0
    assert path_of(cand(10, 0.01, "src/backoffice.py", defines=("retry_with_backoff",)),
                               parse_query("retry_with_backoff")) == 1.0  # `backoff` only starts `backoffice`


def test_size_prior_steps_small_chunks_back() -> None:
    getter = cand(1, 0.020, head="def body(self):\n    return self._body\n")
    real = cand(2, 0.018, head="".join(f"line {i}\n" for i in range(P.small_chunk_lines + 1)))
    out = run([getter, real], "request body", "size")
    assert ids(out) == [2, 1] and out[1].why["size"] == P.small_chunk_penalty and "size" not in out[0].why
    at_limit = cand(3, 0.020, head="".join(f"line {i}\n" for i in range(P.small_chunk_lines)))
    assert size_of(at_limit, parse_query("x")) == P.small_chunk_penalty


def test_kind_prior_demotes_tests_docs_examples_reexports_and_stubs_unless_asked() -> None:
    code = cand(1, 0.010)
    test = cand(2, 0.020, "tests/test_a.py", FileKind.TEST)
    docs = cand(3, 0.025, "docs/a.md", FileKind.DOCS)
    example = cand(4, 0.015, "examples/demo.py")
    reexport = cand(5, 0.016, "pkg/__init__.py", head="from .a import b\nfrom .c import d\n__all__ = ['b', 'd']")
    stub = cand(6, 0.017, "types/index.d.ts")
    generated = [cand(20 + i, 0.018, path) for i, path in enumerate(
        ("api/service_pb2.py", "api/service_pb2_grpc.py", "api/service.pb.go", "lib/model.g.dart", "src/schema_generated.rs"))]
    out = run([code, test, docs, example, reexport, stub, *generated], "parse the config", "kind-prior")
    assert ids(out)[0] == 1
    assert all(c.why["kind-prior"] == P.generated_penalty for c in out if c.chunk_id >= 20)
    assert "kind-prior" not in run([cand(30, 0.01, "api/service_pb2_helpers.py")], "parse", "kind-prior")[0].why
    # a translation catalog steps back behind code that holds the same words, unless translations are asked about
    catalog = cand(40, 0.05, "django/conf/locale/de/LC_MESSAGES/django.po", FileKind.CONFIG)
    validator = cand(41, 0.01, "django/core/validators.py")
    assert ids(run([catalog, validator], "enter a valid email address", "kind-prior")) == [41, 40]
    assert run([catalog], "enter a valid email address", "kind-prior")[0].why["kind-prior"] == pytest.approx(
        P.config_penalty * P.catalog_penalty)
    assert run([catalog], "the german translation of enter a valid email", "kind-prior")[0].why["kind-prior"] == P.config_penalty
    asked = run([code, test], "tests for parsing the config", "kind-prior")
    assert ids(asked) == [2, 1]
    real_init = cand(7, 0.016, "pkg/__init__.py", head="def main():\n    run()\n")
    assert run([real_init], "main", "kind-prior")[0].score == pytest.approx(0.016)


def test_evidence_moves_a_tests_score_to_the_code_it_calls_and_pulls_it_in() -> None:
    test = cand(10, 0.030, "tests/test_auth.py", FileKind.TEST)
    other = cand(11, 0.012, "src/other.py")
    target = cand(12, 0.0, "src/auth.py")
    out = run([test, other], "strip the password", "evidence", evidence={10: [12]},
              fetch=lambda wanted: {12: target} if 12 in wanted else {})
    assert 12 in ids(out)
    pulled = next(c for c in out if c.chunk_id == 12)
    assert pulled.score == pytest.approx(P.evidence_share * 0.030) and pulled.why["evidence"] == [10]
    after = ids(run(out, "strip the password", "kind-prior"))
    assert after.index(12) < after.index(10)  # then the code stands above the test that pointed at it
    # split between several targets; code chunks give nothing away
    split = run([test, other], "x", "evidence", evidence={10: [11, 12], 11: [10]}, fetch=lambda w: {12: target})
    assert next(c for c in split if c.chunk_id == 11).score == pytest.approx(0.012 + P.evidence_share * 0.015)
    assert next(c for c in split if c.chunk_id == 10).score == pytest.approx(0.030)


def test_evidence_pulls_in_only_targets_whose_gain_can_matter() -> None:
    """A test calling ten functions passes each a fortieth of its score: under
    `evidence_min_gain` × the best score, those not among the candidates stay out (each would
    only lengthen every later signal's work); a candidate still gets its share."""
    test = cand(10, 0.030, "tests/test_many.py", FileKind.TEST)
    present = cand(20, 0.010, "src/present.py")
    targets = [20, *range(21, 30)]
    asked: list[list[int]] = []

    def fetch(wanted: Sequence[int]) -> dict[int, object]:
        asked.append(sorted(wanted))
        return {t: cand(t, 0.0, f"src/f{t}.py") for t in wanted}

    gain = P.evidence_share * 0.030 / len(targets)
    assert gain < P.evidence_min_gain * 0.030
    out = run([test, present], "x", "evidence", evidence={10: targets}, fetch=fetch)
    assert ids(out) == [10, 20] and asked == []
    assert next(c for c in out if c.chunk_id == 20).score == pytest.approx(0.010 + gain)
    everything = run([test, present], "x", "evidence", params=replace(P, evidence_min_gain=0.0),
                     evidence={10: targets}, fetch=fetch)
    assert sorted(ids(everything)) == [10, *targets] and asked[-1] == list(range(21, 30))


def test_evidence_along_a_guessed_call_passes_its_weight() -> None:
    test = cand(10, 0.030, "tests/test_auth.py", FileKind.TEST)
    sure, guessed = cand(11, 0.0, "src/auth.py"), cand(12, 0.0, "src/other.py")
    params = replace(P, evidence_guess_weight=0.5)
    out = run([test, sure, guessed], "x", "evidence", params=params, evidence={10: {11: 1.0, 12: 0.5}}, fetch=lambda w: {})
    score = {c.chunk_id: c.score for c in out}
    assert score[11] == pytest.approx(P.evidence_share * 0.030 / 2)
    assert score[12] == pytest.approx(P.evidence_share * 0.030 / 2 * 0.5)

    class Calls:  # what the store says of the test's calls: one found precisely, one by name alone
        def call_target_chunks(self, ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
            return {10: [(11, "scip"), (12, "unique"), (12, "import")], 13: [(12, "same-file")]}

        def chunks_defining_names(self, names: Sequence[str], filters: Filters) -> dict[str, list[int]]:
            return {}

    rows = [test.row, test.row._replace(chunk_id=13)]
    weighed = engine._evidence(Calls(), rows, Filters(), params)  # type: ignore[arg-type]
    assert weighed == {10: {11: 1.0, 12: 1.0}, 13: {12: 0.5}}  # the surer of two edges to one target counts


def test_evidence_is_off_when_the_query_asks_for_tests() -> None:
    test = cand(10, 0.030, "tests/test_auth.py", FileKind.TEST)
    assert run([test], "tests for auth", "evidence", evidence={10: [12]}, fetch=lambda w: {12: cand(12, 0.0)}) == [test]
    reads: list[str] = []

    def links(query: str) -> dict[int, list[int]]:
        reads.append(query)
        return {10: [12]}

    for query in ("tests for auth", "strip the auth header"):
        run([test], query, *ranking.SIGNALS, evidence=lambda q=query: links(q), fetch=lambda w: {})
    assert reads == ["strip the auth header"]  # the links are not even read for a question about tests


def test_signature_weight_counts_query_words_in_the_symbol_head() -> None:
    a = cand(1, 0.020, head="def unrelated_name(x):\n    return x", defines=("unrelated_name",))
    b = cand(2, 0.018, head="def rewind_body(prepared_request):\n    pass", defines=("rewind_body",))
    out = run([a, b], "rewind the body", "signature")
    assert ids(out) == [2, 1] and out[0].why["signature"] == pytest.approx(1 + P.signature_weight)
    plain = cand(3, 0.019, head="rewind body")  # not a symbol chunk: untouched
    assert run([plain], "rewind the body", "signature")[0].score == 0.019


def test_coherence_lifts_a_files_best_chunk_and_caps_chunks_per_file() -> None:
    lone = cand(1, 0.0200, "src/lone.py")
    best = cand(2, 0.0195, "src/busy.py")
    rest = [cand(3 + i, 0.015 - i * 0.001, "src/busy.py") for i in range(5)]
    low = cand(9, 0.005, "src/low.py")
    out = run([lone, best, *rest, low], ANY_QUERY, "coherence")
    assert ids(out)[0] == 2  # lifted by its file's other good chunks
    assert ids(out)[:4] == [2, 1, 9, 3]  # every file's best chunk before any file's second
    assert sum(1 for c in out[:3] if c.row.path == "src/busy.py") == P.max_per_file


def test_coherence_lift_is_relative_to_the_best_supported_file() -> None:
    busy = [cand(1, 0.02, "src/busy.py"), cand(2, 0.01, "src/busy.py")]
    pair = [cand(3, 0.02, "src/pair.py"), cand(4, 0.005, "src/pair.py")]
    lifted = {c.chunk_id: c.why["coherence"] for c in run([*busy, *pair], ANY_QUERY, "coherence") if c.chunk_id in (1, 3)}
    assert lifted == {1: pytest.approx(1 + P.coherence), 3: pytest.approx(1 + P.coherence * 0.5)}
    # many weak one-chunk files joining the candidates leave the lift as it was
    crowd = [cand(10 + i, 0.004, f"src/other{i}.py") for i in range(30)]
    again = {c.chunk_id: c.why["coherence"] for c in run([*busy, *pair, *crowd], ANY_QUERY, "coherence") if c.chunk_id in (1, 3)}
    assert again == lifted


def test_folder_lifts_a_file_whose_folder_holds_other_good_files() -> None:
    lone = cand(1, 0.0200, "src/util.py")
    manager = cand(2, 0.0190, "src/queue/manager.py")
    helper = cand(3, 0.0080, "src/queue/manager.py")  # a file's second chunk is not its folder's support
    siblings = [cand(4, 0.0150, "src/queue/redis.py"), cand(5, 0.0140, "src/queue/sync.py")]
    out = run([lone, manager, helper, *siblings], ANY_QUERY, "folder")
    assert ids(out)[0] == 2 and "folder" not in out[ids(out).index(1)].why  # alone in src/: no support
    by_id = {c.chunk_id: c for c in out}
    most = 0.019 + 0.015  # sync.py's: the other two files of src/queue/
    assert by_id[5].why["folder"] == pytest.approx(1 + P.folder_coherence)
    assert by_id[2].why["folder"] == pytest.approx(1 + P.folder_coherence * (0.015 + 0.014) / most, abs=1e-3)
    assert by_id[4].why["folder"] == pytest.approx(1 + P.folder_coherence * (0.019 + 0.014) / most, abs=1e-3)
    assert "folder" not in by_id[3].why  # only a file's best chunk is lifted
    # nobody shares a folder: nothing moves
    apart = [cand(1, 0.02, "a/x.py"), cand(2, 0.01, "b/y.py")]
    assert run(apart, ANY_QUERY, "folder") == apart


def test_a_signal_records_why_only_when_it_changes_something() -> None:
    code, test = cand(1, 0.02), cand(2, 0.03, "tests/test_a.py", FileKind.TEST)
    out = run([code, test], "parse the config", "kind-prior")
    assert out[0] == code and "kind-prior" not in out[0].why
    assert out[1].why == {"kind-prior": P.test_penalty} and out[1].score == pytest.approx(0.03 * P.test_penalty)


def _random_candidates(rng: random.Random) -> tuple[list[Ranked], dict[int, list[int]], dict[int, Ranked]]:
    """A fused list as the engine hands it over: code, tests, docs, examples, a re-export file and
    a stub across a few folders; tests and docs pointing at candidates and at chunks outside."""
    files = [
        ("src/queue/manager.py", FileKind.CODE), ("src/queue/redis.py", FileKind.CODE), ("src/util.py", FileKind.CODE),
        ("src/auth.py", FileKind.CODE), ("tests/test_auth.py", FileKind.TEST), ("docs/guide.md", FileKind.DOCS),
        ("examples/demo.py", FileKind.CODE), ("pkg/__init__.py", FileKind.CODE), ("types/index.d.ts", FileKind.CODE),
    ]
    heads = [("def rewind_body(request):\n    pass", ("rewind_body",)), ("class Router:\n    routes = []", ("Router",)),
             ("def router(app):\n    pass", ("router",)),
             ("from .a import b\n__all__ = ['b']", ()), ("retry the queue manager later", ()), ("", ())]
    candidates = []
    for cid in range(1, rng.randint(5, 40)):
        path, kind = rng.choice(files)
        head, defines = rng.choice(heads)
        row = ChunkRow(cid, path, 1, rng.randint(1, 40), kind, "python", head, "", tuple(compound(n) for n in defines),
                       spelled=defines)
        candidates.append(Ranked(cid, rng.uniform(0.001, 0.03), {"keyword": cid}, row))
    outside = {cid: cand(cid, 0.0, rng.choice(files[:4])[0]) for cid in range(100, 106)}
    pool = [c.chunk_id for c in candidates] + list(outside)
    evidence = {c.chunk_id: rng.sample(pool, rng.randint(1, 4)) for c in candidates if is_evidence_source(c.row)}
    return candidates, evidence, outside


@pytest.mark.parametrize("query", ["rewind the body", "Router", "how does the queue manager retry", "tests for auth"])
def test_all_signals_in_one_pass_equal_each_signal_in_turn(query: str) -> None:
    rng = random.Random(query)
    shape = parse_query(query)
    for _ in range(50):
        candidates, evidence, outside = _random_candidates(rng)
        fetch = lambda wanted: {cid: outside[cid] for cid in wanted if cid in outside}  # noqa: E731
        # `function` reads the scores from before the file-level lifts: it has no form that runs after them
        signals = [name for name in ranking.SIGNALS if name != "function"]
        one_pass = run(candidates, shape, *signals, evidence=evidence, fetch=fetch)
        turn = run(run(candidates, shape, "definition"), shape, "evidence", evidence=evidence, fetch=fetch)
        for signal in ("kind-prior", "signature", "path", "size", "folder", "coherence"):
            turn = run(turn, shape, signal)
        assert ids(one_pass) == ids(turn)
        assert [c.score for c in one_pass] == pytest.approx([c.score for c in turn], rel=1e-12)
        assert [c.why for c in one_pass] == [c.why for c in turn]
        assert run(candidates, shape, *signals, evidence=evidence, fetch=fetch, limit=3) == one_pass[:3]


def test_coherence_lifts_only_the_files_defining_a_typed_name() -> None:
    """Three chunks that call `retry_with_backoff` say where it is used; the file defining it is
    where it lives. For a question in words, the busy file keeps its lift."""
    user = [cand(1 + i, 0.030 - i * 0.001, "src/jobs.py") for i in range(3)]
    definer = [cand(4, 0.025, "src/retry.py", defines=("retry_with_backoff",)), cand(5, 0.005, "src/retry.py")]
    out = run([*user, *definer], "retry_with_backoff", "coherence")
    assert ids(out)[:2] == [4, 1] and out[0].why["coherence"] == 1 + P.coherence and "coherence" not in out[1].why
    assert ids(run([*user, *definer], "how jobs retry with backoff", "coherence"))[0] == 1
    # no candidate defines the name: every file keeps its support
    assert ids(run([*user, definer[1]], "retry_with_backoff", "coherence"))[0] == 1


def test_a_hard_cap_puts_every_files_extra_chunks_after_every_files_best() -> None:
    busy = [cand(1, 0.03, "src/busy.py"), cand(2, 0.029, "src/busy.py"), cand(3, 0.028, "src/busy.py")]
    low = cand(4, 0.001, "src/low.py")
    out = run([*busy, low], ANY_QUERY, "coherence", params=P.with_values({"file_repeat_decay": 0.0}))
    assert ids(out) == [1, 4, 2, 3] and "coherence" not in out[2].why


def test_ranking_parameters_load_from_toml_and_refuse_unknown_names(tmp_path) -> None:  # noqa: ANN001
    from codewhere.errors import QueryError
    from codewhere.search.params import RankingParams

    file = tmp_path / "fit.toml"
    file.write_text("[ranking]\nPATH_WEIGHT = 2\ncoherence = 0.5\n")
    loaded = RankingParams.from_toml(file)
    assert (loaded.path_weight, loaded.coherence, loaded.definition_boost) == (2.0, 0.5, P.definition_boost)
    with pytest.raises(QueryError, match="no ranking parameter 'nope'"):
        P.with_values({"nope": 1})
    with pytest.raises(AttributeError):
        P.path_weight = 1.0  # type: ignore[misc]  # frozen: a set of numbers is never changed in place


def test_function_fills_a_files_places_with_a_definition_before_a_chunk_of_none() -> None:
    """The imports at the top of `client.py` match the question's words best; the function below
    them is the answer. The file keeps its places and scores; the function takes the first."""
    imports = cand(1, 0.030, "src/client.py")
    request = cand(2, 0.024, "src/client.py", unit="Client.request")
    other = cand(3, 0.026, "src/proxy.py", unit="bypass")
    without = run([imports, request, other], "send the request", "coherence")
    with_it = run([imports, request, other], "send the request", "coherence", "function")
    assert ids(without) == [1, 3, 2] and ids(with_it) == [2, 3, 1]
    assert [c.score for c in with_it] == [c.score for c in without]  # the same places, filled otherwise
    assert with_it[0].why["function"] == 1 and with_it[2].why["function"] == 2 and "function" not in with_it[1].why
    # a chunk of no definition that defines the queried name stays the answer (`module Helpers`)
    module = cand(1, 0.030, "src/client.py", defines=("Helpers",))
    assert ids(run([module, request, other], "Helpers", "coherence", "function"))[0] == 1
    # a definition already first, or a file of one chunk: nothing moves
    assert run([other, request], "send the request", "function") == [other, request]
    # the factor is a parameter: at 1 the chunks of no definition keep their order
    same = run([imports, request, other], "send the request", "coherence", "function",
               params=P.with_values({"anonymous_chunk_factor": 1.0}))
    assert ids(same) == ids(without)


def test_function_reads_each_chunks_score_before_the_files_lift() -> None:
    """coherence lifted the file's best chunk by 1 + coherence; the order inside the file is that
    of the chunks' own scores, so a definition just below a lifted chunk of none still comes first."""
    header = cand(1, 0.020, "src/a.py")
    parse = cand(2, 0.019, "src/a.py", unit="parse")
    others = [cand(3 + i, 0.010, f"src/b{i}.py", unit="f") for i in range(3)]
    out = run([header, parse, *others], "parse the header", "coherence", "function")
    assert ids(out)[0] == 2 and out[0].score > 0.020  # the lifted place, held by the definition
    assert ids(out)[-1] == 1


def test_function_orders_a_files_chunks_by_their_keyword_scores() -> None:
    """Fused ranks put `connect` first in client.py (keyword rank 40, vector rank 5 fuse like the
    reverse); `retry` holds the question's words better. It takes the file's place; a chunk the
    deeper keyword read did not reach (no score) comes after those it did."""
    connect = cand(1, 0.030, "src/client.py", unit="connect")
    retry = cand(2, 0.020, "src/client.py", unit="retry")
    close = cand(3, 0.022, "src/client.py", unit="close")
    other = cand(4, 0.025, "src/proxy.py", unit="bypass")
    without = run([connect, retry, close, other], "retry a failed request", "function")
    assert ids(without) == [1, 4, 3, 2]
    scores = {1: 2.0, 2: 5.0, 4: 3.0}
    out = run([connect, retry, close, other], "retry a failed request", "function", keyword=scores)
    assert ids(out) == [2, 4, 1, 3] and [c.score for c in out] == [c.score for c in without]
    assert out[0].why["function"] == 1 and out[2].why["function"] == 2 and out[3].why["function"] == 3
    # a file where the deeper read found none of its chunks keeps its chunks' own order
    assert ids(run([connect, retry, close, other], "retry a failed request", "function", keyword={4: 3.0})) == ids(without)


def test_function_prefers_the_longer_definition_and_keeps_the_per_chunk_signals() -> None:
    """Of two functions with the same BM25 score, the longer one (BM25 normalised its length
    away); a per-chunk signal (size: a three-line chunk steps back) still counts."""
    short = cand(1, 0.030, "src/a.py", unit="short", unit_lines=3)
    long = cand(2, 0.020, "src/a.py", head="\n" * 19, unit="long", unit_lines=60)
    assert ids(run([short, long], ANY_QUERY, "function", keyword={1: 4.0, 2: 4.0})) == [2, 1]
    assert ids(run([short, long], ANY_QUERY, "function", keyword={1: 4.0, 2: 4.0},
                   params=P.with_values({"function_length_exponent": 0.0}))) == [1, 2]  # a tie keeps the file's order
    # 6 × 3^0.1 = 6.70 over 4 × 60^0.1 = 6.02; with size the three-line chunk × 0.7 = 4.69 falls behind
    assert ids(run([short, long], ANY_QUERY, "function", keyword={1: 6.0, 2: 4.0})) == [1, 2]
    assert ids(run([short, long], ANY_QUERY, "size", "function", keyword={1: 6.0, 2: 4.0})) == [2, 1]


def test_function_lifts_the_first_files_second_definition_when_one_file_stands_out() -> None:
    """The question's words stand out in a.py (whole-file BM25 10 against 2): its second function,
    matching 0.9 as well as its first, moves above b.py's chunk to the first's score × 0.5 × 0.9;
    when b.py's file score is close (9), or the second chunk is a window of the same function,
    a.py's further chunk steps back as before."""
    def rank(second_unit: str, b_score: float, params: RankingParams = P) -> list[Ranked]:
        first = cand(1, 0.030, "src/a.py", unit="first")
        second = cand(2, 0.028, "src/a.py", unit="second")
        if second_unit == "first":  # a second window of the first function
            second = Ranked(2, 0.028, {}, second.row._replace(unit=first.row.unit))
        return run([first, second, cand(3, 0.020, "src/b.py", unit="other")], ANY_QUERY, "coherence", "function",
                   params=params, keyword={1: 5.0, 2: 4.5, 3: 1.0}, files={("", "src/a.py"): 10.0, ("", "src/b.py"): b_score})

    lifted = rank("second", 2.0)
    assert ids(lifted) == [1, 2, 3] and lifted[1].why["function"] == 2
    assert lifted[1].score == pytest.approx(lifted[0].score * P.function_runner_up * 4.5 / 5.0)
    assert ids(rank("second", 9.0)) == [1, 3, 2]  # b.py holds the words nearly as well: no single place
    assert ids(rank("first", 2.0)) == [1, 3, 2]  # a window of the same function is not a second answer
    assert ids(rank("second", 2.0, P.with_values({"function_runner_up": 0}))) == [1, 3, 2]


def test_function_keeps_a_hard_caps_places() -> None:
    busy = [cand(1, 0.03, "src/busy.py"), cand(2, 0.029, "src/busy.py", unit="g"), cand(3, 0.028, "src/busy.py", unit="h")]
    low = cand(4, 0.001, "src/low.py")
    out = run([*busy, low], ANY_QUERY, "coherence", "function", params=P.with_values({"file_repeat_decay": 0.0}))
    assert ids(out) == [2, 4, 3, 1]  # busy.py's first place, then low.py, then busy.py's capped ones


def test_file_words_lifts_the_chunks_of_the_file_whose_whole_text_holds_the_question() -> None:
    """jobs.py's best chunk leads; retry.py as a whole holds the question's words better and
    lifts every chunk of it by 1 + weight × its score over the best file's (another repository's
    file of the same path, here); a file the list did not reach gains nothing."""
    jobs = cand(1, 0.030, "src/jobs.py", unit="run")
    retry = [cand(2, 0.024, "src/retry.py", unit="backoff"), cand(3, 0.012, "src/retry.py", unit="retry")]
    other = cand(4, 0.020, "src/other.py", unit="f")
    candidates = [jobs, *retry, other]
    files = {("", "src/retry.py"): 6.0, ("", "src/jobs.py"): 2.0, ("elsewhere", "src/other.py"): 9.0}
    assert ids(run(candidates, ANY_QUERY, "file-words")) == [1, 2, 4, 3]  # no scores: nothing moves
    out = run(candidates, ANY_QUERY, "file-words", files=files)
    w = P.file_words_weight
    assert ids(out) == [2, 1, 3, 4] and out[0].why["file-words"] == round(1 + w * 6 / 9, 3)
    assert out[1].why["file-words"] == round(1 + w * 2 / 9, 3) and "file-words" not in out[3].why
    assert out[2].score == pytest.approx(0.012 * (1 + w * 6 / 9))


def test_every_signal_that_notes_a_factor_has_a_place_in_the_output_schema() -> None:
    """The MCP tools' structured output keeps only the `why` keys its schema names: a signal
    missing there would vanish from agents' answers (file-words did, until this test)."""
    from codewhere.output import Why
    from codewhere.render import why_words

    noted = set(ranking.SIGNALS) - {"query-shape"}  # it weighs the fusion, it notes nothing
    assert noted <= set(Why.__annotations__)
    assert all(not word.startswith(f"{name}:") for name in noted - {"function", "evidence"} for word in why_words({name: 1.5}))


def test_why_in_words_a_user_reads() -> None:
    from codewhere.render import why_words

    words = why_words({"keyword": 2, "semantic": 1, "function": 1, "coherence": 0.0, "kind-prior": 0.2, "path": 1.4, "evidence": [3]})
    assert words == [
        "matches the question's words (#2)", "close in meaning (#1)", "the best match among its file's definitions",
        "another part of its file ranks higher", "a test, docs, config, example or generated file: lowered ×0.2",
        "the question's words in its file or folder name: raised ×1.4", "used by 1 matching test or doc",
    ]
