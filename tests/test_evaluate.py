from __future__ import annotations

import json
import math
from html.parser import HTMLParser
from pathlib import Path

import pytest

from codewhere.errors import QueryError
from codewhere.evaluate import (
    EvalQuery,
    QueryScore,
    Target,
    covers,
    load_query_file,
    ndcg_at_k,
    path_matches,
    score_query,
    summarise,
)
from codewhere.types import FileKind, Hit
from tests.conftest import SAMPLE_REPO, shared_file, write_tree


def hit(path: str, start: int = 1, end: int = 10) -> Hit:
    return Hit(path, start, end, 0.0, FileKind.CODE, "python", "")


def test_ndcg_hand_computed() -> None:
    assert ndcg_at_k([1], 1) == 1.0
    assert ndcg_at_k([2], 1) == pytest.approx(1 / math.log2(3))
    # two targets found at ranks 1 and 3 of two: (1 + 1/log2(4)) / (1 + 1/log2(3))
    assert ndcg_at_k([1, 3], 2) == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k([11], 1) == 0.0
    assert ndcg_at_k([], 0) == 0.0
    # the ideal list is capped at 10 relevant results
    assert ndcg_at_k(list(range(1, 11)), 15) == pytest.approx(1.0)


def test_path_suffix_matching_both_ways() -> None:
    assert path_matches("src/flask/app.py", "flask/app.py")
    assert path_matches("app.py", "src/flask/app.py")
    assert path_matches("src\\flask\\app.py", "flask/app.py")
    assert not path_matches("src/flask/myapp.py", "app.py")
    assert not path_matches("src/flask/app.py", "src/flask")


def test_span_overlap_rules() -> None:
    target = Target("a.py", 50, 60)
    assert covers("a.py", 40, 50, target) and covers("a.py", 60, 70, target) and covers("a.py", 52, 55, target)
    assert not covers("a.py", 61, 80, target) and not covers("a.py", 1, 49, target)
    assert covers("a.py", 1, 2, Target("a.py"))  # a path-only target is hit anywhere in the file


def test_score_uses_first_result_per_target_and_indexed_targets_for_the_ideal() -> None:
    q = EvalQuery("q", relevant=(Target("a.py"),), secondary=(Target("b.py", 5, 5), Target("gone.py")))
    hits = [hit("x.py"), hit("a.py"), hit("a.py"), hit("b.py", 1, 9)]
    rank, ndcg = score_query(hits, q)
    assert rank == 2
    all_three_ideal = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 1 / math.log2(4))
    assert ndcg == pytest.approx(all_three_ideal)
    two_indexed_ideal = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert score_query(hits, q, indexed_targets=2)[1] == pytest.approx(two_indexed_ideal)
    assert score_query([hit("x.py")], q) == (None, 0.0)


def test_summary_counts_top_k_and_mrr() -> None:
    s = summarise([QueryScore(1, 1.0, 0.001), QueryScore(4, 0.4, 0.003), QueryScore(7, 0.3, 0.002), QueryScore(None, 0.0, 0.01)])
    assert (s.top5, s.top10) == (2, 3)
    assert s.mrr == pytest.approx((1 + 1 / 4 + 1 / 7) / 4)
    assert s.ndcg10 == pytest.approx(1.7 / 4)
    assert s.p50_ms == pytest.approx(3.0)


def test_study_format() -> None:
    qf = load_query_file(shared_file("bench", "requests-seed.json"))
    assert len(qf.queries) == 12
    first = qf.queries[0]
    assert first.label == "should_strip_auth" and first.relevant == (Target("src/requests/sessions.py", 127, 127),)
    assert first.published["bm25"] == 9 and qf.published_columns[0] == "bm25"


def test_semble_format() -> None:
    qf = load_query_file(shared_file("semble-bench", "annotations", "flask.json"))
    assert qf.queries and all(q.category in {"semantic", "architecture", "symbol"} for q in qf.queries)
    assert any(q.secondary for q in qf.queries) or all(q.relevant for q in qf.queries)


def test_bad_query_files_are_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "odd.json").write_text('{"something": 1}')
    (tmp_path / "broken.json").write_text('[{"relevant": ["a.py"]}]')
    for name in ("bad.json", "odd.json", "broken.json", "missing.json"):
        with pytest.raises(QueryError):
            load_query_file(tmp_path / name)


def write_queries(tmp_path: Path) -> Path:
    queries = [
        {"query": "charge_credit_card", "relevant": ["src/shop/payment.py"], "category": "symbol"},
        {"query": "total price of the cart", "relevant": [{"path": "shop/cart.py", "start_line": 13, "end_line": 14}]},
        {"query": "refund a payment", "relevant": ["src/shop/payment.py"], "secondary": ["docs/guide.md"]},
    ]
    path = tmp_path / "queries.json"
    path.write_text(json.dumps(queries))
    return path


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        self.tags.append(tag)
        if tag != "meta":
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs) -> None:
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"unbalanced </{tag}>"
        self.open.pop()


def test_cli_eval_json_csv_scope_and_html_report(tmp_path: Path, cli) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    queries = write_queries(tmp_path)
    result = cli("eval", str(queries), str(root), "--json")
    assert result.code == 0, result.err
    payload = json.loads(result.out)
    assert set(payload["summary"]) == {"keyword", "semantic", "fusion", "hybrid"}
    assert payload["queries"][0]["ranks"]["keyword"] == 1
    assert payload["queries"][0]["ndcg10"]["keyword"] == 1.0
    assert payload["queries"][2]["indexed_targets"] == 2
    scoped = json.loads(cli("eval", str(queries), str(root), "--json", "--scope", "src", "--modes", "keyword").out)
    assert scoped["scope"] == ["src"] and set(scoped["summary"]) == {"keyword"}
    assert scoped["queries"][2]["indexed_targets"] == 1  # docs/guide.md is outside the scope
    csv_out = cli("eval", str(queries), str(root), "--csv", "--modes", "keyword,hybrid")
    header, *rows = csv_out.out.strip().splitlines()
    assert header.startswith("label,query,category") and "rank_hybrid" in header and len(rows) == 3
    report = tmp_path / "report.html"
    text = cli("eval", str(queries), str(root), "--report", str(report))
    assert text.code == 0 and "NDCG@10" in text.out
    page = report.read_text()
    parser = _Collect()
    parser.feed(page)
    assert parser.open == [] and parser.tags.count("svg") == 2 and "polyline" in parser.tags
    assert "charge_credit_card" in page and "http" not in page.split("<svg", 1)[1].replace("http://www.w3.org/2000/svg", "")


def test_cli_eval_unknown_mode(tmp_path: Path, cli) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    result = cli("eval", str(write_queries(tmp_path)), str(root), "--modes", "keyword,magic")
    assert result.code == 2 and "unknown mode" in result.err
