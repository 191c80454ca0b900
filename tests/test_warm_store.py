"""A SQLite store that keeps its chunks in memory once a process searches again: the same
answers as reading the file, and never an answer from before the index changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewhere.embed.fake import FakeEmbedder
from codewhere.store import sqlite
from codewhere.types import FileKind, Filters
from tests.conftest import bump_mtime

NEW_FUNCTION = "def shipping_label_printer(order):\n    return f'label for {order}'\n"


def _all_ids(store) -> list[int]:
    return [cid for (cid,) in store._db.execute("SELECT id FROM chunks ORDER BY id")]


def _read_afresh(store) -> dict:
    """Every chunk row as a store that never kept anything reads it from the same file."""
    other = sqlite.SqliteStore.open(store.path, store.repo)
    try:
        return other.candidate_rows(_all_ids(other), Filters())
    finally:
        other.close()


def _edit(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    bump_mtime(path)


def test_kept_chunks_read_the_same_as_the_file(sample_repo: Path, open_sqlite_index) -> None:
    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder())
    index.refresh()
    store = index.store
    ids = _all_ids(store)
    from_file = (store.candidate_rows(ids, Filters()), store.get_chunks(ids), store.call_target_chunks(ids))
    assert from_file[2], "the sample's test calls charge_credit_card: there must be a call target to compare"
    store.keep_chunks_in_memory()
    from_memory = (store.candidate_rows(ids, Filters()), store.get_chunks(ids), store.call_target_chunks(ids))
    assert store._warm is not None and len(store._warm.rows) == len(ids)
    assert from_memory == from_file


def test_one_search_reads_the_file_and_a_second_keeps_the_chunks(sample_repo: Path, open_sqlite_index) -> None:
    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder())
    index.refresh()
    index.search("cart total")
    assert index.store._warm is None  # a one-shot `codewhere search` never pays the load
    index.search("cart total")
    assert index.store._warm is not None


def test_filters_still_apply_to_kept_chunks(sample_repo: Path, open_sqlite_index) -> None:
    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder())
    index.refresh()
    store = index.store
    ids = _all_ids(store)
    store.keep_chunks_in_memory()
    scoped = store.candidate_rows(ids, Filters(scopes=("src/shop",)))
    assert scoped and all(row.path.startswith("src/shop/") for row in scoped.values())
    no_tests = store.candidate_rows(ids, Filters(exclude_kinds=(FileKind.TEST,)))
    assert no_tests and all(row.kind is not FileKind.TEST for row in no_tests.values())
    assert len(no_tests) < len(ids)
    assert store.candidate_rows(ids, Filters(repos=("another-repo",))) == {}
    assert len(store.candidate_rows(ids, Filters(repos=(store.repo,)))) == len(ids)


def test_an_edit_after_the_chunks_were_kept_is_searched(sample_repo: Path, open_sqlite_index) -> None:
    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder())
    index.refresh()
    for _ in range(2):
        index.search("refund payment")
    assert index.store._warm is not None
    untouched = {cid: row for cid, row in index.store._warm.rows.items() if row.path == "src/shop/cart.py"}
    _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION)
    (sample_repo / "src/lib.rs").unlink()
    (sample_repo / "src/shop/labels.py").write_text("def print_label():\n    return 'label'\n", encoding="utf-8")
    index.refresh()
    hits = index.search("shipping_label_printer")
    assert index.store._warm.rows == _read_afresh(index.store)
    assert untouched and all(index.store._warm.rows[cid] is row for cid, row in untouched.items())  # not reread
    assert hits[0].path == "src/shop/payment.py" and "label for" in hits[0].snippet
    gone = [hit for hit in index.search("refund payment") if hit.path == "src/shop/payment.py" and "refund" in hit.snippet]
    assert not gone


def test_a_commit_by_another_process_is_seen(sample_repo: Path, open_sqlite_index, tmp_path: Path) -> None:
    index_file = tmp_path / "shared.sqlite"
    reader = open_sqlite_index(sample_repo, index_path=index_file, embedder=FakeEmbedder())
    reader.refresh()
    for _ in range(2):
        reader.search("cart", mode="keyword")
    assert reader.store._warm is not None
    writer = open_sqlite_index(sample_repo, index_path=index_file, embedder=FakeEmbedder())
    _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION)
    writer.refresh()
    # keyword search finds the new chunk in the file; its text must come from the new state too
    hits = reader.search("shipping_label_printer", mode="keyword")
    assert hits and hits[0].path == "src/shop/payment.py" and "label for" in hits[0].snippet


def test_an_index_past_the_memory_limit_is_read_per_query(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder())
    index.refresh()
    first = index.search("charge a credit card")
    monkeypatch.setattr(sqlite, "WARM_TEXT_LIMIT", 100)
    again = [index.search("charge a credit card") for _ in range(2)]
    assert index.store._warm is None and not index.store._keep_warm
    assert again[0] == again[1] == first


def test_an_index_past_the_chunk_limit_is_read_per_query(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder())
    index.refresh()
    monkeypatch.setattr(sqlite, "WARM_CHUNK_LIMIT", 3)
    index.store.keep_chunks_in_memory()
    assert index.store.get_chunks(_all_ids(index.store)) and index.store._warm is None
    index.store.keep_chunks_in_memory()  # asked again: still no
    assert not index.store._keep_warm


def test_a_rechunked_index_is_read_again_whole(sample_repo: Path, open_sqlite_index, tmp_path: Path) -> None:
    """Re-chunking deletes every chunk and may hand the same ids to new ones: all is reread."""
    index_file = tmp_path / "shared.sqlite"
    reader = open_sqlite_index(sample_repo, index_path=index_file, embedder=FakeEmbedder())
    reader.refresh()
    reader.store.keep_chunks_in_memory()
    before = dict(reader.store._warm_chunks().rows)
    open_sqlite_index(sample_repo, index_path=index_file, embedder=FakeEmbedder(), chunker="lines").refresh()
    after = reader.store._warm_chunks().rows
    assert after != before and after == _read_afresh(reader.store)


def test_searches_in_threads_while_the_index_changes(sample_repo: Path, open_sqlite_index) -> None:
    """MCP calls run in worker threads on one index: updates of the kept chunks must not mix."""
    from concurrent.futures import ThreadPoolExecutor

    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder())
    index.refresh()

    def search(n: int) -> int:
        return len(index.search("charge a credit card" if n % 2 else "shipping label", k=5))

    with ThreadPoolExecutor(4) as pool:
        running = [pool.submit(search, n) for n in range(40)]
        for version in range(3):
            _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION.replace("label for", f"label v{version} for"))
            index.refresh()
        assert all(job.result() > 0 for job in running)
    hits = index.search("shipping_label_printer")
    assert "label v2 for" in hits[0].snippet
    assert index.store._warm.rows == _read_afresh(index.store)
