from __future__ import annotations

import random

import pytest

from codewhere.search import signals
from codewhere.search.fuse import rrf
from codewhere.search.params import DEFAULT_PARAMS as P
from codewhere.search.query import parse_query
from codewhere.search.signals import Candidate
from codewhere.store.base import CandidateRow
from codewhere.tokens import compound
from codewhere.types import FileKind


def cand(cid: int, score: float, path: str = "src/a.py", kind: FileKind = FileKind.CODE, head: str = "",
         defines: tuple[str, ...] = ()) -> Candidate:
    """`defines`: names as written, as the store keeps them beside their compound form."""
    lines = head.count("\n") + (0 if head.endswith("\n") else 1)
    return Candidate(cid, score, path, kind, 1, lines, head, tuple(compound(n) for n in defines), spelled=defines)


def ids(candidates: list[Candidate]) -> list[int]:
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
    assert signals.fusion_weights(parse_query("getUserById"))["semantic"] < 1.0
    assert signals.fusion_weights(parse_query("how users are loaded"))["semantic"] == 1.0
    # a chunk that uses the name tops both text lists; the one that defines it is only in the
    # definers' list: for an identifier the definer wins, for prose the user
    user, definer = 1, 2
    lists = {"keyword": [user], "semantic": [user], "names": [definer]}
    assert [cid for cid, _, _ in rrf(lists, weights=signals.fusion_weights(parse_query("getUserById")))] == [definer, user]
    assert [cid for cid, _, _ in rrf(lists, weights=signals.fusion_weights(parse_query("how users are loaded")))] == [user, definer]


def test_definition_boost_puts_the_definer_first() -> None:
    user = cand(1, 0.030, defines=("run",))
    definer = cand(2, 0.025, defines=("retry_with_backoff",))
    out = signals.definition_boost([user, definer], parse_query("retry_with_backoff"))
    assert ids(out) == [2, 1] and out[0].why["definition"] == 1 + P.definition_boost
    assert ids(signals.definition_boost([user, definer], parse_query("how retries work"))) == [1, 2]


def test_definition_boost_prefers_the_file_named_after_the_symbol() -> None:
    head = "public static partial class SqlMapper\n{"
    partial = cand(1, 0.030, "Dapper/SqlMapper.CacheInfo.cs", head=head, defines=("SqlMapper",))
    home = cand(2, 0.025, "Dapper/SqlMapper.cs", head=head, defines=("SqlMapper",))
    user = cand(3, 0.040, "Dapper/Other.cs")
    out = signals.definition_boost([partial, home, user], parse_query("SqlMapper"))
    assert ids(out) == [2, 1, 3]
    assert out[0].why["definition"] == pytest.approx((1 + P.definition_boost) * (1 + P.definition_file_boost))
    assert signals.file_named_after("lib/rack/requests.rb", frozenset({"request"}))  # plural file name
    assert signals.file_named_after("src/retry_policy.py", frozenset({"retrypolicy"}))
    assert not signals.file_named_after("src/retry_policy.py", frozenset({"retry"}))


def test_a_name_typed_with_a_capital_is_defined_only_where_it_is_spelled_so() -> None:
    method = cand(1, 0.030, "lib/sinatra/base.rb", head="    def helpers\n      @instance\n", defines=("helpers",))
    module = cand(2, 0.025, "lib/sinatra/base.rb", head="  # routes\n  module Helpers\n", defines=("Helpers",))
    out = signals.definition_boost([method, module], parse_query("Sinatra::Helpers"))
    assert ids(out) == [2, 1] and "definition" not in out[1].why
    # typed in lowercase, the case says nothing: both are definers
    out = signals.definition_boost([method, module], parse_query("helpers"))
    assert ids(out) == [1, 2] and out[0].why["definition"] == out[1].why["definition"] == 1 + P.definition_boost
    assert parse_query("Sinatra::Helpers").capitalised == {"Helpers"} and not parse_query("helpers").capitalised
    assert not parse_query("where does parseHeaders split lines").capitalised  # its capital only separates words
    # the name must be defined spelled so, not merely appear in the chunk: `let dispatch: Dispatch = …`
    variable = cand(3, 0.030, "src/applyMiddleware.ts", head="let dispatch: Dispatch = () => {", defines=("dispatch",))
    type_ = cand(4, 0.025, "src/types/store.ts", head="export interface Dispatch<A> {", defines=("Dispatch",))
    out = signals.definition_boost([variable, type_], parse_query("Dispatch"))
    assert ids(out) == [4, 3] and "definition" not in out[1].why


def test_path_signal_reads_the_file_name_and_its_folder() -> None:
    far = cand(1, 0.020, "src/scheduler/a/b/util.rs")  # the word sits three folders up
    near = cand(2, 0.015, "src/net/scheduler.rs")
    out = signals.path_match([far, near], parse_query("how the scheduler works"))
    assert ids(out) == [2, 1] and "path" not in out[1].why
    assert out[0].why["path"] > 1


def test_path_signal_matches_a_word_that_starts_another() -> None:
    other = cand(1, 0.020, "lua/lazy/core/plugin.lua")
    lock = cand(2, 0.015, "lua/lazy/manage/lock.lua")
    out = signals.path_match([other, lock], parse_query("how the lockfile pins commits"))
    assert ids(out) == [2, 1] and out[0].why["path"] > 1 and "path" not in out[1].why
    shape = parse_query("lockfile")
    assert signals.path_factor(cand(3, 0.01, "src/lo.py"), shape) == 1.0  # too short to count as a prefix
    assert signals.path_factor(cand(4, 0.01, "src/configuration.py"), parse_query("config loading")) > 1.0


def test_path_signal_prefers_a_file_named_wholly_in_the_questions_words() -> None:
    # both paths hold `mime`, one of the question's three words; only one is named for it alone
    utils = cand(1, 0.020, "lib/rack/mime_utils.rb")
    mime = cand(2, 0.018, "lib/rack/mime.rb")
    shape = parse_query("MIME type detection")
    out = signals.path_match([utils, mime], shape)
    assert ids(out) == [2, 1]
    assert signals.path_factor(mime, shape) == pytest.approx(signals.path_factor(utils, shape) * (1 + P.path_name_boost))
    # camel case and the path rule's prefixes: `HttpRedirect` is `http` + `redirect`, "redirects" finds it
    prefix = P.path_prefix_min
    assert signals.named_in("ktor/plugins/HttpRedirect.kt", parse_query("how HTTP redirects are followed").path_terms, prefix)
    assert not signals.named_in("ktor/plugins/HttpRedirect.kt", parse_query("how redirects are followed").path_terms, prefix)
    # an identifier has its own rule (named after it), which this does not add to
    assert signals.path_factor(cand(3, 0.01, "lib/rack/mime.rb"), parse_query("mime")) == 1 + P.path_weight


def test_the_whole_file_name_rule_leaves_identifiers_alone() -> None:
    # `retry.py` is named wholly in the words of `retry_with_backoff`, and its chunk defines the name:
    # the path rule for identifiers (whole words, for the definer) decides, the boost does not
    definer = cand(1, 0.01, "src/retry.py", defines=("retry_with_backoff",))
    identifier, prose = parse_query("retry_with_backoff"), parse_query("retry failed requests")
    prefix = P.path_prefix_min
    assert signals.named_in(definer.path, identifier.path_terms, prefix) and signals.named_in(definer.path, prose.path_terms, prefix)
    before = signals.path_factor(definer, identifier), signals.path_factor(definer, prose)
    bigger = P.with_values({"path_name_boost": P.path_name_boost + 1})
    assert signals.path_factor(definer, identifier, bigger) == before[0]
    assert signals.path_factor(definer, prose, bigger) > before[1]


def test_path_parameters_of_another_set_take_effect_at_once() -> None:
    # fit_signals.py tries parameter sets one after another in one process: the path signal's
    # caches must not answer with the old ones
    shape = parse_query("how redirects are followed")
    deep = cand(1, 0.01, "src/redirects/rules/policy.py")  # the word two folders above the file
    short = cand(2, 0.01, "src/redir.py")  # `redir` starts `redirect`: the prefix rule
    first = P.with_values({"path_folders": 1, "path_prefix_min": 3})
    assert signals.path_factor(deep, shape, first) == 1.0
    assert signals.path_factor(short, shape, first) > 1.0
    second = P.with_values({"PATH_FOLDERS": 0, "PATH_PREFIX_MIN": 6})  # every folder
    assert signals.path_factor(deep, shape, second) > 1.0
    assert signals.path_factor(short, shape, second) == 1.0


def test_path_signal_takes_only_a_file_or_folder_named_after_an_identifier() -> None:
    folder = cand(1, 0.01, "fastapi/dependencies/utils.py")
    named = cand(2, 0.01, "fastapi/depends.py")
    assert signals.path_factor(folder, parse_query("Depends")) == 1.0  # `depend` only starts `dependencies`
    assert signals.path_factor(named, parse_query("Depends")) == 1 + P.path_weight
    assert signals.path_factor(folder, parse_query("what a route depends on")) > 1.0  # prose keeps the prefix rule
    # a file sharing a part of the name is not named after it; a file or folder spelled so is
    assert signals.path_factor(cand(3, 0.01, "lib/curl_trc.c"), parse_query("curl_msnprintf")) == 1.0
    assert signals.path_factor(cand(4, 0.01, "lib/easy.c"), parse_query("Curl_easy")) == 1.0
    assert signals.path_factor(cand(5, 0.01, "tokio/src/task/join_set.rs"), parse_query("JoinSet")) > 1.0
    assert signals.path_factor(cand(6, 0.01, "tokio/src/sync/mpsc/mod.rs"), parse_query("mpsc")) > 1.0
    assert signals.path_factor(cand(7, 0.01, "lib/rack/builder.rb"), parse_query("Rack::Builder")) > 1.0
    # a file sharing a part of the name still counts for the name's definer, by whole words
    definer = cand(8, 0.01, "src/retry.py", defines=("retry_with_backoff",))
    assert signals.path_factor(definer, parse_query("retry_with_backoff")) > 1.0
    assert signals.path_factor(cand(9, 0.01, "src/retry.py"), parse_query("retry_with_backoff")) == 1.0
    assert signals.path_factor(cand(10, 0.01, "src/backoffice.py", defines=("retry_with_backoff",)),
                               parse_query("retry_with_backoff")) == 1.0  # `backoff` only starts `backoffice`


def test_size_prior_steps_small_chunks_back() -> None:
    getter = cand(1, 0.020, head="def body(self):\n    return self._body\n")
    real = cand(2, 0.018, head="".join(f"line {i}\n" for i in range(P.small_chunk_lines + 1)))
    out = signals.size_prior([getter, real], parse_query("request body"))
    assert ids(out) == [2, 1] and out[1].why["size"] == P.small_chunk_penalty and "size" not in out[0].why
    at_limit = cand(3, 0.020, head="".join(f"line {i}\n" for i in range(P.small_chunk_lines)))
    assert signals.size_factor(at_limit, parse_query("x")) == P.small_chunk_penalty


def test_kind_prior_demotes_tests_docs_examples_reexports_and_stubs_unless_asked() -> None:
    code = cand(1, 0.010)
    test = cand(2, 0.020, "tests/test_a.py", FileKind.TEST)
    docs = cand(3, 0.025, "docs/a.md", FileKind.DOCS)
    example = cand(4, 0.015, "examples/demo.py")
    reexport = cand(5, 0.016, "pkg/__init__.py", head="from .a import b\nfrom .c import d\n__all__ = ['b', 'd']")
    stub = cand(6, 0.017, "types/index.d.ts")
    out = signals.kind_prior([code, test, docs, example, reexport, stub], parse_query("parse the config"))
    assert ids(out)[0] == 1
    asked = signals.kind_prior([code, test], parse_query("tests for parsing the config"))
    assert ids(asked) == [2, 1]
    real_init = cand(7, 0.016, "pkg/__init__.py", head="def main():\n    run()\n")
    assert signals.kind_prior([real_init], parse_query("main"))[0].score == pytest.approx(0.016)


def test_evidence_moves_a_tests_score_to_the_code_it_calls_and_pulls_it_in() -> None:
    test = cand(10, 0.030, "tests/test_auth.py", FileKind.TEST)
    other = cand(11, 0.012, "src/other.py")
    target = cand(12, 0.0, "src/auth.py")
    out = signals.evidence_transfer([test, other], parse_query("strip the password"), {10: [12]}, lambda wanted: {12: target} if 12 in wanted else {})
    assert 12 in ids(out)
    pulled = next(c for c in out if c.chunk_id == 12)
    assert pulled.score == pytest.approx(P.evidence_share * 0.030) and pulled.why["evidence"] == [10]
    after = ids(signals.kind_prior(out, parse_query("strip the password")))
    assert after.index(12) < after.index(10)  # then the code stands above the test that pointed at it
    # split between several targets; code chunks give nothing away
    split = signals.evidence_transfer([test, other], parse_query("x"), {10: [11, 12], 11: [10]}, lambda w: {12: target})
    assert next(c for c in split if c.chunk_id == 11).score == pytest.approx(0.012 + P.evidence_share * 0.015)
    assert next(c for c in split if c.chunk_id == 10).score == pytest.approx(0.030)


def test_evidence_is_off_when_the_query_asks_for_tests() -> None:
    test = cand(10, 0.030, "tests/test_auth.py", FileKind.TEST)
    assert signals.evidence_transfer([test], parse_query("tests for auth"), {10: [12]}, lambda w: {12: cand(12, 0.0)}) == [test]
    reads: list[str] = []

    def links(query: str) -> dict[int, list[int]]:
        reads.append(query)
        return {10: [12]}

    for query in ("tests for auth", "strip the auth header"):
        signals.apply_signals([test], parse_query(query), signals.SIGNALS, lambda q=query: links(q), lambda w: {})
    assert reads == ["strip the auth header"]  # the links are not even read for a question about tests


def test_signature_weight_counts_query_words_in_the_symbol_head() -> None:
    a = cand(1, 0.020, head="def unrelated_name(x):\n    return x", defines=("unrelated_name",))
    b = cand(2, 0.018, head="def rewind_body(prepared_request):\n    pass", defines=("rewind_body",))
    out = signals.signature_weight([a, b], parse_query("rewind the body"))
    assert ids(out) == [2, 1] and out[0].why["signature"] == pytest.approx(1 + P.signature_weight)
    plain = cand(3, 0.019, head="rewind body")  # not a symbol chunk: untouched
    assert signals.signature_weight([plain], parse_query("rewind the body"))[0].score == 0.019


def test_coherence_lifts_a_files_best_chunk_and_caps_chunks_per_file() -> None:
    lone = cand(1, 0.0200, "src/lone.py")
    best = cand(2, 0.0195, "src/busy.py")
    rest = [cand(3 + i, 0.015 - i * 0.001, "src/busy.py") for i in range(5)]
    low = cand(9, 0.005, "src/low.py")
    out = signals.file_coherence([lone, best, *rest, low])
    assert ids(out)[0] == 2  # lifted by its file's other good chunks
    assert ids(out)[:4] == [2, 1, 9, 3]  # every file's best chunk before any file's second
    assert sum(1 for c in out[:3] if c.path == "src/busy.py") == P.max_per_file


def test_coherence_lift_is_relative_to_the_best_supported_file() -> None:
    busy = [cand(1, 0.02, "src/busy.py"), cand(2, 0.01, "src/busy.py")]
    pair = [cand(3, 0.02, "src/pair.py"), cand(4, 0.005, "src/pair.py")]
    lifted = {c.chunk_id: c.why["coherence"] for c in signals.file_coherence([*busy, *pair]) if c.chunk_id in (1, 3)}
    assert lifted == {1: pytest.approx(1 + P.coherence), 3: pytest.approx(1 + P.coherence * 0.5)}
    # many weak one-chunk files joining the candidates leave the lift as it was
    crowd = [cand(10 + i, 0.004, f"src/other{i}.py") for i in range(30)]
    again = {c.chunk_id: c.why["coherence"] for c in signals.file_coherence([*busy, *pair, *crowd]) if c.chunk_id in (1, 3)}
    assert again == lifted


def test_folder_lifts_a_file_whose_folder_holds_other_good_files() -> None:
    lone = cand(1, 0.0200, "src/util.py")
    manager = cand(2, 0.0190, "src/queue/manager.py")
    helper = cand(3, 0.0080, "src/queue/manager.py")  # a file's second chunk is not its folder's support
    siblings = [cand(4, 0.0150, "src/queue/redis.py"), cand(5, 0.0140, "src/queue/sync.py")]
    out = signals.folder_coherence([lone, manager, helper, *siblings])
    assert ids(out)[0] == 2 and "folder" not in out[ids(out).index(1)].why  # alone in src/: no support
    by_id = {c.chunk_id: c for c in out}
    most = 0.019 + 0.015  # sync.py's: the other two files of src/queue/
    assert by_id[5].why["folder"] == pytest.approx(1 + P.folder_coherence)
    assert by_id[2].why["folder"] == pytest.approx(1 + P.folder_coherence * (0.015 + 0.014) / most, abs=1e-3)
    assert by_id[4].why["folder"] == pytest.approx(1 + P.folder_coherence * (0.019 + 0.014) / most, abs=1e-3)
    assert "folder" not in by_id[3].why  # only a file's best chunk is lifted
    # nobody shares a folder: nothing moves
    apart = [cand(1, 0.02, "a/x.py"), cand(2, 0.01, "b/y.py")]
    assert signals.folder_coherence(apart) == apart


def test_a_signal_records_why_only_when_it_changes_something() -> None:
    code, test = cand(1, 0.02), cand(2, 0.03, "tests/test_a.py", FileKind.TEST)
    out = signals.kind_prior([code, test], parse_query("parse the config"))
    assert out[0] == code and "kind-prior" not in out[0].why
    assert out[1].why == {"kind-prior": P.test_penalty} and out[1].score == pytest.approx(0.03 * P.test_penalty)


def _random_candidates(rng: random.Random) -> tuple[list[Candidate], dict[int, list[int]], dict[int, Candidate]]:
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
        candidates.append(Candidate(cid, rng.uniform(0.001, 0.03), path, kind, 1, rng.randint(1, 40), head,
                                    tuple(compound(n) for n in defines), {"keyword": cid}, spelled=defines))
    outside = {cid: cand(cid, 0.0, rng.choice(files[:4])[0]) for cid in range(100, 106)}
    pool = [c.chunk_id for c in candidates] + list(outside)
    evidence = {c.chunk_id: rng.sample(pool, rng.randint(1, 4)) for c in candidates if signals.is_evidence_source(c)}
    return candidates, evidence, outside


@pytest.mark.parametrize("query", ["rewind the body", "Router", "how does the queue manager retry", "tests for auth"])
def test_all_signals_in_one_pass_equal_each_signal_in_turn(query: str) -> None:
    rng = random.Random(query)
    shape = parse_query(query)
    for _ in range(50):
        candidates, evidence, outside = _random_candidates(rng)
        fetch = lambda wanted: {cid: outside[cid] for cid in wanted if cid in outside}  # noqa: E731
        one_pass = signals.apply_signals(candidates, shape, signals.SIGNALS, lambda: evidence, fetch)
        turn = signals.evidence_transfer(signals.definition_boost(candidates, shape), shape, evidence, fetch)
        for signal in (signals.kind_prior, signals.signature_weight, signals.path_match, signals.size_prior):
            turn = signal(turn, shape)
        turn = signals.file_coherence(signals.folder_coherence(turn), shape)
        assert ids(one_pass) == ids(turn)
        assert [c.score for c in one_pass] == pytest.approx([c.score for c in turn], rel=1e-12)
        assert [c.why for c in one_pass] == [c.why for c in turn]
        assert signals.apply_signals(candidates, shape, signals.SIGNALS, lambda: evidence, fetch, limit=3) == one_pass[:3]


def _row(c: Candidate) -> CandidateRow:
    return CandidateRow(c.chunk_id, c.path, c.start_line, c.end_line, c.kind, "python", c.text, "", c.defines, c.mentions,
                        c.spelled)


@pytest.mark.parametrize("query", ["rewind the body", "Router", "how does the queue manager retry"])
def test_the_stores_rows_with_scores_beside_them_rank_as_candidates_do(query: str) -> None:
    """The engine hands the store's rows in as they are, scores and `why`s in lists beside them."""
    rng = random.Random(query)
    shape = parse_query(query)
    for _ in range(30):
        candidates, evidence, outside = _random_candidates(rng)
        as_candidates = signals.apply_signals(candidates, shape, signals.SIGNALS, lambda: evidence,
                                              lambda wanted: {cid: outside[cid] for cid in wanted if cid in outside})
        as_rows = signals.rank_chunks(
            [_row(c) for c in candidates], [c.score for c in candidates], [c.why for c in candidates], shape,
            signals.SIGNALS, lambda: evidence, lambda wanted: {cid: _row(outside[cid]) for cid in wanted if cid in outside},
        )
        assert as_rows == as_candidates


def test_coherence_lifts_only_the_files_defining_a_typed_name() -> None:
    """Three chunks that call `retry_with_backoff` say where it is used; the file defining it is
    where it lives. For a question in words, the busy file keeps its lift."""
    user = [cand(1 + i, 0.030 - i * 0.001, "src/jobs.py") for i in range(3)]
    definer = [cand(4, 0.025, "src/retry.py", defines=("retry_with_backoff",)), cand(5, 0.005, "src/retry.py")]
    out = signals.file_coherence([*user, *definer], parse_query("retry_with_backoff"))
    assert ids(out)[:2] == [4, 1] and out[0].why["coherence"] == 1 + P.coherence and "coherence" not in out[1].why
    assert ids(signals.file_coherence([*user, *definer], parse_query("how jobs retry with backoff")))[0] == 1
    # no candidate defines the name: every file keeps its support
    assert ids(signals.file_coherence([*user, definer[1]], parse_query("retry_with_backoff")))[0] == 1


def test_a_hard_cap_puts_every_files_extra_chunks_after_every_files_best() -> None:
    busy = [cand(1, 0.03, "src/busy.py"), cand(2, 0.029, "src/busy.py"), cand(3, 0.028, "src/busy.py")]
    low = cand(4, 0.001, "src/low.py")
    out = signals.file_coherence([*busy, low], params=P.with_values({"file_repeat_decay": 0.0}))
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
