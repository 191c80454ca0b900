from __future__ import annotations

from pathlib import Path

import pytest

from codewhere.errors import QueryError
from codewhere.search.fuse import rrf
from codewhere.store.sqlite import fts5_expression
from codewhere.types import TermQuery
from tests.conftest import write_tree


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("charge_credit_card", "src/shop/payment.py"),
        ("chargeCreditCard", "src/shop/payment.py"),
        ("getUserById", "src/web/handlers.ts"),
        ("get_user_by_id", "src/web/handlers.ts"),
        ("HandleLogin", "src/server/router.go"),
        ("RateLimiter", "src/lib.rs"),
        ("parse_config", "src/lib.rs"),
        ("Cart.add_item", "src/shop/cart.py"),
        ("SessionStore", "src/web/handlers.ts"),
    ],
)
def test_identifier_query_ranks_its_definition_first(sample_repo: Path, open_index, query: str, path: str) -> None:
    index = open_index(sample_repo)
    index.refresh()
    hits = index.search(query)
    assert hits[0].path == path
    assert hits[0].why.get("names") == 1


def test_definition_outranks_files_that_mention_the_name_more(tmp_path: Path, open_index) -> None:
    mentions = "\n".join(f"    retry_with_backoff(job{i})  # retry_with_backoff again" for i in range(30))
    write_tree(tmp_path, {
        "src/a_user.py": f"def run_all():\n{mentions}\n",
        "src/z_retry.py": "def retry_with_backoff(job):\n    return job()\n",
    })
    index = open_index(tmp_path)
    index.refresh()
    paths = [h.path for h in index.search("retry_with_backoff")]
    assert paths[0] == "src/z_retry.py" and set(paths) == {"src/z_retry.py", "src/a_user.py"}


def test_a_name_typed_with_a_capital_is_found_where_it_is_defined_spelled_so(tmp_path: Path, open_index) -> None:
    """`Dispatch` is the class, not the function `dispatch` that uses it everywhere; typed in
    lowercase, both are definers."""
    uses = "".join(f"    step_{i}: Dispatch = Dispatch(event, {i})\n" for i in range(12))
    write_tree(tmp_path, {
        "src/a_events.py": f"def dispatch(event: Dispatch) -> Dispatch:\n{uses}    return step_0\n",
        "src/z_types.py": "class Dispatch:\n    \"\"\"An event on its way to its handlers.\"\"\"\n\n    name: str\n",
    })
    index = open_index(tmp_path)
    index.refresh()
    hits = index.search("Dispatch")
    assert hits[0].path == "src/z_types.py" and hits[0].why.get("names") == 1
    assert [("names" in h.why, "definition" in h.why) for h in hits if h.path == "src/a_events.py"] == [(False, False)]
    assert {h.path for h in index.search("dispatch") if "names" in h.why} == {"src/a_events.py", "src/z_types.py"}


def test_evidence_from_a_test_and_a_doc_section_reaches_the_code(tmp_path: Path, open_index) -> None:
    """The question's words are only in a test (which calls the code) and in a doc section (which
    names it); the code they point at must still be found, with the evidence named in `why`."""
    filler = "".join(f"    step_{i} = prepared.headers.get('X-{i}')\n" for i in range(12))
    write_tree(tmp_path, {
        "src/auth.py": f"def strip_credentials(prepared, previous_url):\n{filler}    prepared.headers.pop('Authorization', None)\n",
        "src/other.py": "def unrelated_helper(value):\n" + filler.replace("prepared", "value") + "    return value\n",
        "tests/test_auth.py": (
            "from src.auth import strip_credentials\n\n\n"
            "def test_password_is_not_sent_to_another_site_after_a_redirect():\n"
            "    # the password must not reach another site when a redirect changes the site\n"
            "    strip_credentials(make_request(password='secret'), 'https://another.site/')\n"
        ),
        "docs/guide.md": (
            "# Guide\n\n## Keeping a login secret\n\n"
            "When the server answers with a new location, `unrelated_helper` keeps your login secret on the next hop.\n"
        ),
    })
    index = open_index(tmp_path)
    index.refresh()
    hits = index.search("password sent to another site after a redirect", k=10)
    code = next(h for h in hits if h.path == "src/auth.py")
    assert code.why.get("evidence") and hits.index(code) < next(i for i, h in enumerate(hits) if h.path.startswith("tests/"))
    without = index.search("password sent to another site after a redirect", k=10, disabled_signals=("evidence",))
    assert all("evidence" not in h.why for h in without)
    prose = index.search("keeping a login secret on the next hop", k=10)
    helper = next(h for h in prose if h.path == "src/other.py")
    assert helper.why.get("evidence")


def test_plain_language_query_matches_split_identifiers(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo)
    index.refresh()
    assert index.search("total price of the cart")[0].path == "src/shop/cart.py"
    assert index.search("refund a payment", exclude_tests=True, exclude_docs=True)[0].path == "src/shop/payment.py"


def test_scope_and_kind_filters(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo)
    index.refresh()
    everywhere = {h.path for h in index.search("charge_credit_card", k=20, mode="keyword")}
    assert everywhere == {"src/shop/payment.py", "tests/test_payment.py", "docs/guide.md"}
    assert {h.path for h in index.search("charge_credit_card", mode="keyword", scopes=["./src/"])} == {"src/shop/payment.py"}
    assert {h.path for h in index.search("charge_credit_card", mode="keyword", scopes=[str(sample_repo / "tests")])} == {"tests/test_payment.py"}
    assert {h.path for h in index.search("charge_credit_card", mode="keyword", scopes=["docs/guide.md"])} == {"docs/guide.md"}
    assert {h.path for h in index.search("charge_credit_card", k=20, mode="keyword", exclude_tests=True)} == {"src/shop/payment.py", "docs/guide.md"}
    assert {h.path for h in index.search("charge_credit_card", k=20, mode="keyword", exclude_docs=True)} == {"src/shop/payment.py", "tests/test_payment.py"}


def test_scope_prefix_is_a_folder_not_a_string_prefix(tmp_path: Path, open_index) -> None:
    write_tree(tmp_path, {"src/a.py": "def unique_name(): pass\n", "srcx/b.py": "def unique_name(): pass\n", "s_c/c.py": "unique_name()\n"})
    index = open_index(tmp_path)
    index.refresh()
    assert {h.path for h in index.search("unique_name", scopes=["src"])} == {"src/a.py"}
    with pytest.raises(QueryError, match="matches no indexed file"):  # `%` is a character, not a wildcard
        index.search("unique_name", scopes=["s%c"])
    assert {h.path for h in index.search("unique_name", scopes=["src"], mode="semantic")} == {"src/a.py"}


def test_scope_outside_root_is_a_query_error(sample_repo: Path, open_index, tmp_path: Path) -> None:
    index = open_index(sample_repo)
    index.refresh()
    with pytest.raises(QueryError):
        index.search("cart", scopes=[str(tmp_path / "elsewhere")])


@pytest.mark.parametrize("query", ['"unbalanced', "AND OR NOT", "a*b:c^d", "NEAR(x y)", "col:value -x +y", "()", "'; DROP TABLE chunks;--"])
def test_fts_syntax_in_user_text_never_crashes(sample_repo: Path, open_index, query: str) -> None:
    index = open_index(sample_repo)
    index.refresh()
    index.search(query)  # no exception; results may be empty


def test_fts5_expression_quotes_every_term() -> None:
    assert fts5_expression(TermQuery(("send", "or"))) == '"send" OR "or"'
    assert fts5_expression(TermQuery(('a"b', "c"), "all")) == '"a""b" AND "c"'
    assert fts5_expression(TermQuery(("parse", "config"), "phrase")) == 'split : "parse config"'


def test_rrf_is_rank_based_with_k_60_and_top_30() -> None:
    fused = rrf({"keyword": [1, 2, 3], "semantic": [3, 4]})
    scores = {cid: score for cid, score, _ in fused}
    assert scores[3] == pytest.approx(1 / 63 + 1 / 61)
    assert scores[1] == pytest.approx(1 / 61)
    assert [cid for cid, _, _ in fused] == [3, 1, 2, 4]  # 2 and 4 tie at 1/62: first seen first
    assert fused[0][2] == {"keyword": 3, "semantic": 1}
    deep = rrf({"a": list(range(100))})
    assert len(deep) == 30


def test_like_escape_makes_wildcards_and_backslashes_literal() -> None:
    from codewhere.store.base import like_escape

    assert like_escape("a_b%c\\d") == "a\\_b\\%c\\\\d"


def test_a_ranking_file_changes_the_numbers_the_search_uses(sample_repo: Path, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from codewhere.api import Index
    from codewhere.config import Settings
    from codewhere.embed.fake import FakeEmbedder

    with Index.open(sample_repo, settings=Settings.from_env(), embedder=FakeEmbedder()) as index:
        index.refresh()
        # no set was fitted for the fake model: plain fusion, no definition factor
        assert index.ranking_set.name == "neutral"
        assert "definition" not in index.search("charge_credit_card", k=1)[0].why
    (tmp_path / "fit.toml").write_text("[ranking]\ndefinition_boost = 0.25\ndefinition_file_boost = 0\n")
    monkeypatch.setenv("CODEWHERE_RANKING_PARAMS", str(tmp_path / "fit.toml"))
    with Index.open(sample_repo, settings=Settings.from_env(), embedder=FakeEmbedder()) as index:
        assert index.ranking_set.params.definition_boost == 0.25
        assert index.ranking_set.name == f"file {tmp_path / 'fit.toml'}"
        assert index.search("charge_credit_card", k=1)[0].why["definition"] == 1.25


def test_the_public_api_is_one_import(sample_repo: Path) -> None:
    from codewhere import Index, SearchRequest
    from codewhere.embed.fake import FakeEmbedder

    with Index.open(sample_repo, embedder=FakeEmbedder()) as index:
        index.refresh()
        by_request = index.run(SearchRequest("charge_credit_card", k=3, kinds=("code",)))
        by_arguments = index.search("charge_credit_card", k=3, kinds=["code"])
        assert by_request == by_arguments and by_request[0].path == "src/shop/payment.py"
        assert {h.kind.value for h in by_request} == {"code"}


def test_a_hit_reports_the_definition_it_belongs_to_once(tmp_path: Path, open_index) -> None:
    """A long function is cut into windows; whichever window matches, the hit is the function,
    from the comment above it, named, and its other windows do not take more places."""
    steps = "".join(f"    ledger.append(settle_invoice_line({i}, amount))\n" for i in range(150))
    write_tree(tmp_path, {
        "src/billing.py": f"import ledger\n\n# Settles every line of an invoice.\ndef settle_all(amount):\n{steps}    return ledger\n",
        "src/other.py": "def unrelated():\n    return 1\n",
    })
    index = open_index(tmp_path)
    index.refresh()
    end = 4 + 150 + 1
    hits = index.search("settle invoice line ledger amount", k=5, mode="keyword")
    assert hits[0].path == "src/billing.py" and (hits[0].start_line, hits[0].end_line, hits[0].symbol) == (3, end, "settle_all")
    assert sum(1 for h in hits if h.symbol == "settle_all") == 1  # its many windows make one hit
    assert "settle_invoice_line" in hits[0].snippet


def test_a_files_words_are_scored_as_one_document_and_kept_with_the_file(tmp_path: Path, open_index) -> None:
    """The file-words signal reads each file as one document: words spread over two functions of
    routing.py outscore one of them in each of two files; an edit and a deletion reach it."""
    from codewhere.search.query import parse_query
    from codewhere.types import Filters

    write_tree(tmp_path, {
        "src/routing.py": "def read_setting(config):\n    return config['SERVER_NAME']\n\n\n"
                          "def match(rule):\n    return rule.subdomain_matching\n",
        "src/server.py": "def server_name(config):\n    return config['SERVER_NAME']\n",
        "src/hosts.py": "def subdomains(rule):\n    return rule.subdomain_matching\n",
    })
    index = open_index(tmp_path)
    index.refresh()
    terms = TermQuery(parse_query("server name subdomain matching").terms)

    def scores(filters: Filters | None = None) -> dict[str, float]:
        found = index.store.file_keyword_search(terms, 10, filters or Filters())
        return {path: score for (_, path), score in found.items()}

    first = scores()
    assert max(first, key=first.__getitem__) == "src/routing.py" and set(first) == {"src/routing.py", "src/server.py", "src/hosts.py"}
    assert set(scores(Filters(scopes=("src/hosts.py",)))) == {"src/hosts.py"}
    (tmp_path / "src/routing.py").write_text("def read_setting(config):\n    return config['TIMEOUT']\n")
    (tmp_path / "src/hosts.py").unlink()
    index.refresh()
    assert set(scores()) == {"src/server.py"}  # the edited file's old words and the deleted file are gone
