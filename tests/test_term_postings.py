"""A warm reader of an index too big to hold its chunks keeps the postings of the terms asked,
read from FTS5 itself, and answers keyword searches from them as the store does."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewhere.embed.fake import FakeEmbedder
from codewhere.store import warm
from codewhere.store.sqlite import _varint_sum
from codewhere.store.term_postings import HeldTerms
from codewhere.store.warm import WarmReader
from codewhere.types import Filters, TermQuery
from tests.conftest import bump_mtime

# a body past 127 tokens: its length in FTS5's docsize record takes a two-byte varint
LONG_FILE = "def ledger_totals(entries):\n" + "".join(f"    total_{n} = entries[{n}] + ledger\n" for n in range(60))


def _too_big_to_hold(sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN001, ANN202
    (sample_repo / "src/ledger.py").write_text(LONG_FILE, encoding="utf-8")
    monkeypatch.setattr(warm, "WARM_CHUNK_LIMIT", 3)
    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder(), warm=True)
    index.refresh()
    reader = index.reader
    assert isinstance(reader, WarmReader) and reader.chunks() is None and reader.refused
    return index, reader


def _queries(index) -> list[TermQuery]:  # noqa: ANN001
    rows = index.store.chunk_rows(sorted(r[0] for _, r in index.store.rows_of_files(None)), Filters())
    words = sorted({w.lower() for row in rows.values() for w in row.text.split() if w.isalpha()})
    queries = [TermQuery(tuple(words[i:i + n]), field_weights=(2.0, 1.0)) for n in (1, 3) for i in range(0, len(words), 5)]
    return [*queries, TermQuery(("ledger", "total", "entries"), field_weights=(2.0, 1.0)), TermQuery(("cart", "payment", "src"))]


def _wait_until_held(reader: WarmReader, query: TermQuery) -> None:
    for _ in range(50):
        held = reader._held_terms
        if held is not None and held.best("chunks_fts", query.terms, query.field_weights, 1) is not None \
                and held.best("files_fts", query.terms, query.field_weights, 1) is not None:
            return
        if held is not None:
            held.fetched.wait(0.2)
            held.fetched.clear()
        reader.keyword_search(query, 1, Filters())
        reader.file_keyword_search(query, 1, Filters())
    raise AssertionError(f"the terms of {query} were never held")


def _agrees_with_the_store(index, reader: WarmReader, query: TermQuery) -> None:  # noqa: ANN001
    store = index.store
    from_store, from_memory = store.keyword_search(query, 30, Filters()), reader.keyword_search(query, 30, Filters())
    assert [c for c, _ in from_memory] == [c for c, _ in from_store], query
    assert [s for _, s in from_memory] == pytest.approx([s for _, s in from_store], rel=1e-9)
    files_in_store, files_in_memory = store.file_keyword_search(query, 1000, Filters()), reader.file_keyword_search(query, 1000, Filters())
    assert set(files_in_memory) == set(files_in_store), query
    assert [files_in_memory[f] for f in files_in_store] == pytest.approx(list(files_in_store.values()), rel=1e-9)


def test_held_terms_answer_as_fts5_does(sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch) -> None:
    index, reader = _too_big_to_hold(sample_repo, open_sqlite_index, monkeypatch)
    queries = _queries(index)
    asked = queries[-2]
    assert reader.keyword_search(asked, 30, Filters()) == index.store.keyword_search(asked, 30, Filters())  # the store, meanwhile
    for query in queries:
        _wait_until_held(reader, query)
        _agrees_with_the_store(index, reader, query)
    held = reader._held_terms
    assert held is not None and not held.failed
    assert held._tables["chunks_fts"].rows == len(list(index.store.rows_of_files(None)))
    # the long chunk (its length a two-byte varint, so its scores above test the decoding) is an answer
    assert any(index.store.chunk_rows([c], Filters())[c].path == "src/ledger.py" for c, _ in reader.keyword_search(asked, 3, Filters()))


def test_an_edit_drops_what_was_held_and_the_new_state_is_answered(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, reader = _too_big_to_hold(sample_repo, open_sqlite_index, monkeypatch)
    asked = TermQuery(("shipping", "label", "printer"))
    _wait_until_held(reader, asked)
    assert reader.keyword_search(asked, 5, Filters()) == []
    path = sample_repo / "src/shop/cart.py"
    path.write_text("def shipping_label_printer(order):\n    return f'label for {order}'\n", encoding="utf-8")
    bump_mtime(path)
    index.refresh()
    held = reader._held_terms
    assert held is not None
    assert held.best("files_fts", ("ledger",), (1.0, 1.0), 5) is None  # another table's ask: nothing held is of this state
    for _ in range(50):  # the terms held before the edit are read again without being asked
        if {("chunks_fts", t) for t in asked.terms} <= set(held._terms):
            break
        held.fetched.wait(0.2)
        held.fetched.clear()
    else:
        raise AssertionError("the terms held before the edit were not read again")
    found = reader.keyword_search(asked, 5, Filters())
    assert found and [c for c, _ in found] == [c for c, _ in index.store.keyword_search(asked, 5, Filters())]
    _agrees_with_the_store(index, reader, asked)
    assert index.search("shipping label printer", mode="keyword")[0].path == "src/shop/cart.py"


def test_past_the_budget_the_least_recently_asked_terms_go(sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch) -> None:
    index, _ = _too_big_to_hold(sample_repo, open_sqlite_index, monkeypatch)
    held = HeldTerms(index.store, budget=3)
    first, second = TermQuery(("ledger",)), TermQuery(("cart",))
    for query in (first, second):
        while held.best("chunks_fts", query.terms, (1.0, 1.0), 5) is None:
            held.fetched.wait(5)
            held.fetched.clear()
    assert ("chunks_fts", "cart") in held._terms and ("chunks_fts", "ledger") not in held._terms
    assert held._held <= max(3, len(held._terms["chunks_fts", "cart"][0]))
    # dropped: read again (a rare term, by the search itself), and now the other goes
    assert held.best("chunks_fts", first.terms, (1.0, 1.0), 5) is not None
    assert ("chunks_fts", "ledger") in held._terms and ("chunks_fts", "cart") not in held._terms


def test_a_rare_term_is_read_by_the_search_a_common_one_in_a_thread(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, _ = _too_big_to_hold(sample_repo, open_sqlite_index, monkeypatch)
    held = HeldTerms(index.store)
    while held.best("chunks_fts", ("ledger",), (1.0, 1.0), 5) is None:  # the first ask reads the lengths in a thread
        held.fetched.wait(5)
        held.fetched.clear()
    rare = TermQuery(("refund", "payment"))
    found = held.best("chunks_fts", rare.terms, (1.0, 1.0), 10)
    assert found is not None  # at once
    in_store = index.store.keyword_search(rare, 10, Filters())
    ordered = sorted(found, key=lambda f: (-f[1], f[0]))
    assert [c for c, _ in ordered] == [c for c, _ in in_store]
    assert [s for _, s in ordered] == pytest.approx([s for _, s in in_store], rel=1e-9)
    monkeypatch.setattr("codewhere.store.term_postings.IN_SEARCH_INSTANCES", 0)  # as if `total` were common
    assert held.best("chunks_fts", ("total",), (1.0, 1.0), 10) is None
    assert held.fetched.wait(10)
    assert held.best("chunks_fts", ("total",), (1.0, 1.0), 10) is not None


def test_postings_that_cannot_be_read_leave_the_store_answering(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, reader = _too_big_to_hold(sample_repo, open_sqlite_index, monkeypatch)

    def unreadable(table: str, terms: object, in_search: bool = False) -> None:
        raise OSError("no shared memory for a read-only folder")

    monkeypatch.setattr(index.store, "term_postings", unreadable)
    asked = TermQuery(("cart", "total"))
    expected = index.store.keyword_search(asked, 10, Filters())
    assert reader.keyword_search(asked, 10, Filters()) == expected
    held = reader._held_terms
    assert held is not None and held.fetched.wait(10) and held.failed
    assert reader.keyword_search(asked, 10, Filters()) == expected


def test_varints_of_a_docsize_record_are_summed() -> None:
    assert _varint_sum(bytes([3, 0x81, 0x05])) == 3 + 133
    assert _varint_sum(bytes([0x82, 0x80, 0x01, 7])) == (2 << 14) + 1 + 7


def test_a_warm_search_over_held_terms_answers_as_a_one_shot_search(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (sample_repo / "src/ledger.py").write_text(LONG_FILE, encoding="utf-8")
    index_file = tmp_path / "index.sqlite"
    one_shot = open_sqlite_index(sample_repo, index_path=index_file, embedder=FakeEmbedder())
    one_shot.refresh()
    monkeypatch.setattr(warm, "WARM_CHUNK_LIMIT", 3)
    warm_index = open_sqlite_index(sample_repo, index_path=index_file, embedder=FakeEmbedder(), warm=True)
    for question in ("ledger totals of the entries", "charge a credit card", "cart total"):
        expected = one_shot.search(question)
        assert warm_index.search(question) == expected  # FTS5 answers while the words are read
        reader = warm_index.reader
        assert isinstance(reader, WarmReader) and reader.refused
        held = reader._held_terms
        assert held is not None
        assert held.idle(10)
        with monkeypatch.context() as patched:  # from the held postings: FTS5 is not asked
            for name in ("keyword_search", "file_keyword_search"):
                patched.setattr(warm_index.store, name, _not_asked)
            assert warm_index.search(question) == expected


def _not_asked(*args: object) -> None:
    raise AssertionError("FTS5 was asked for held terms")
