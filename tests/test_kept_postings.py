"""A compact index moves FTS5's keyword rows into postings without positions
(store/kept_postings.py): its keyword answers stay FTS5's own, through edits, deletions and
filters, as a one-shot search and as a warm reader's held terms."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from codewhere import indexer
from codewhere.store import kept_postings, quantized, sqlite
from codewhere.store.term_postings import HeldTerms
from codewhere.types import Filters, TermQuery
from tests.conftest import bump_mtime


@pytest.mark.parametrize("seed", range(5))
def test_postings_read_back_as_written(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    docs = rng.choice(2**40, n, replace=False)
    in_path = rng.integers(0, 3, n)
    in_text = rng.integers(0, 100_000, n)
    blob = _encoded(docs, in_path, in_text)
    got_docs, got_path, got_text = kept_postings.decode([blob, _encoded(docs[:3] + 2**41, in_path[:3], in_text[:3])])
    order = np.argsort(docs)
    assert got_docs.tolist() == docs[order].tolist() + (np.sort(docs[:3]) + 2**41).tolist()
    assert got_path[:n].tolist() == in_path[order].tolist() and got_text[:n].tolist() == in_text[order].tolist()
    values = rng.integers(0, 2**62, 50)
    assert kept_postings.from_varints(kept_postings.varints(values)).tolist() == values.tolist()


def _encoded(docs: np.ndarray, in_path: np.ndarray, in_text: np.ndarray) -> bytes:
    """One term's blob."""
    _, blobs = kept_postings.encode_by_term(np.zeros(len(docs), np.int64), docs, in_path, in_text)
    return blobs[0] if blobs else kept_postings.varints(np.zeros(1, np.int64))


QUERIES = [("cart",), ("charge", "credit", "card"), ("payment", "src"), ("total", "price", "items"), ("shop",),
           ("route", "handler", "user"), ("guide",), ("def", "return")]


def _answers(store: sqlite.SqliteStore, filters: Filters | None = None) -> list[object]:
    """Every query's chunk and file answers, chunks named by path and lines (ids differ between indexes)."""
    out: list[object] = []
    filters = filters or Filters()
    for terms in QUERIES:
        for match in ("any", "all"):
            query = TermQuery(terms, match, (2.0, 1.0))
            found = store.keyword_search(query, 50, filters)
            rows = store.chunk_rows([c for c, _ in found], Filters())
            out.append([(rows[c].path, rows[c].start_line, rows[c].end_line, round(s, 9)) for c, s in found])
            files = store.file_keyword_search(query, 50, filters)
            out.append(sorted((path, round(s, 9)) for (_, path), s in files.items()))
    return out


def test_a_compact_index_answers_keywords_as_fts5_does(sample_repo: Path, tmp_path: Path, open_sqlite_index,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    plain_repo = shutil.copytree(sample_repo, tmp_path / "plain")
    plain = open_sqlite_index(plain_repo)
    plain.refresh()
    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 4)
    monkeypatch.setattr(sqlite.schema, "FOLD_CHUNKS", 1_000)  # moved at the switch, then only as asked below
    monkeypatch.setattr(indexer, "BATCH_FILES", 2)  # many commits
    kept = open_sqlite_index(sample_repo)
    kept.refresh()
    store = kept.store
    assert isinstance(store, sqlite.SqliteStore) and store._kept_through() > 0
    assert store._db.execute("SELECT count(DISTINCT part) FROM kept_postings").get == 1
    assert _answers(store) == _answers(plain.store)
    assert _answers(store, Filters(scopes=("src",))) == _answers(plain.store, Filters(scopes=("src",)))

    # edits and deletions: moved rows marked gone, new rows in FTS5, then moved again
    for repo in (sample_repo, plain_repo):
        cart = repo / "src/shop/cart.py"
        cart.write_text(cart.read_text() + "\n\ndef cart_discount_total(items):\n    return sum(items) * 0.9\n")
        bump_mtime(cart)
        (repo / "docs/guide.md").unlink()
    plain.refresh()
    kept.refresh()
    assert _answers(store) == _answers(plain.store)
    chunk_ids = {c for _, row in store.rows_of_files(None) for c in [row.chunk_id]}
    assert min(chunk_ids) <= store._kept_through() < max(chunk_ids), "both the kept postings and FTS5 answer"
    store_ids = [c for c, _ in store.keyword_search(TermQuery(("cart",)), 50, Filters())]
    assert set(store_ids) <= chunk_ids, "no deleted chunk is answered"
    # a second move: the edited rows join the kept ones as a new part
    monkeypatch.setattr(sqlite.schema, "FOLD_CHUNKS", 1)
    for repo in (sample_repo, plain_repo):
        payment = repo / "src/shop/payment.py"
        payment.write_text(payment.read_text() + "\n\ndef refund_credit_card(card, amount):\n    return -amount\n")
        bump_mtime(payment)
    plain.refresh()
    kept.refresh()
    assert store._db.execute("SELECT count(DISTINCT part) FROM kept_postings").get == 2
    assert _answers(store) == _answers(plain.store)
    assert _answers(store, Filters(scopes=("src",))) == _answers(plain.store, Filters(scopes=("src",)))

    # a warm reader's held terms read the kept postings too
    held = HeldTerms(store)
    for terms in QUERIES:
        query = TermQuery(terms, "any", (2.0, 1.0))
        held.search(terms, (2.0, 1.0), 50)  # the first ask may leave the reading to a thread
        held.idle(10)
        found = held.search(terms, (2.0, 1.0), 50)
        assert found is not None
        expected = store.keyword_search(query, 50, Filters())
        assert [c for c, _ in found] == [c for c, _ in expected]
        assert [s for _, s in found] == pytest.approx([s for _, s in expected], rel=1e-9)
        held.file_search(terms, (2.0, 1.0), 50)
        held.idle(10)
        assert held.file_search(terms, (2.0, 1.0), 50) == pytest.approx(store.file_keyword_search(query, 50, Filters()), rel=1e-9)


def test_moved_rows_free_fts5_and_a_rebuild_starts_over(sample_repo: Path, open_sqlite_index,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 4)
    monkeypatch.setattr(sqlite.schema, "FOLD_CHUNKS", 1)
    index = open_sqlite_index(sample_repo)
    index.refresh()
    store = index.store
    assert store._db.execute("SELECT count(*) FROM chunks_fts_docsize").get == 0, "every row moved at the last commit"
    through = store._kept_through()
    assert through == store._db.execute("SELECT max(id) FROM chunks").get
    last_file = store._db.execute("SELECT f.path FROM chunks c JOIN files f ON f.id = c.file_id ORDER BY c.id DESC LIMIT 1").get
    (sample_repo / last_file).unlink()
    index.refresh()
    (sample_repo / last_file).write_text("def brand_new_function_here():\n    return 1\n")
    index.refresh()
    new_ids = [c for c, _ in store.keyword_search(TermQuery(("brand",)), 5, Filters())]
    assert new_ids and min(new_ids) > through, "a chunk id the kept postings name is never given again"
    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 10_000)
    index.refresh(rebuild=True)
    assert index.store._kept_through() == 0 and index.store.keyword_search(TermQuery(("cart",)), 5, Filters())


def test_rows_held_since_the_last_move_encode_as_fts5_reads_them_back(sample_repo: Path, open_sqlite_index,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer keeps what it wrote since the last move (kept_postings.Pending) so a move need
    not read FTS5's positions back: both ways give the same rows, non-ASCII words included."""
    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 4)
    monkeypatch.setattr(sqlite.schema, "FOLD_CHUNKS", 10_000)
    index = open_sqlite_index(sample_repo)
    index.refresh()
    store = index.store
    assert store._kept_through() > 0 and store._pending is not None
    for name, text in (("src/shop/café.py", "def crème_brûlée(naïve):\n    return 'Ünïcode' + naïve\n"),
                       ("src/shop/cart.py", "def cart_total(items):\n    return sum(i.price for i in items)\n")):
        (sample_repo / name).write_text(text, encoding="utf-8")
        bump_mtime(sample_repo / name)
    index.refresh()
    assert store._pending.files, "the edits are held"
    with store.transaction():
        moving = store._pending.moving()
        names = store._pending.term_names()
        terms, blobs = kept_postings.encode_by_term(moving.term, moving.docs, moving.in_path, moving.in_text)
        held = sorted((names[t], b) for t, b in zip(terms.tolist(), blobs, strict=True))
        assert held == sorted(store._fts_postings("chunks_fts").items())
        assert {"cremebrulee", "naive"} <= {t for t, _ in held}  # folded as FTS5 does
        for table, docs, lengths in (("chunks_fts", moving.chunks, moving.chunk_lengths),
                                     ("files_fts", moving.files, moving.file_lengths)):
            read_docs, read_lengths = store._fts_lengths(store._db, table)
            assert dict(zip(read_docs.tolist(), read_lengths.tolist(), strict=True)) == \
                dict(zip(docs.tolist(), lengths.tolist(), strict=True))
        # a file's postings are its chunks' (files_fts, read back, against per_file over the held chunks)
        store._vocabulary(store._db)
        file_docs = np.sort(moving.files)
        for term, blob in held:
            expected = store._term_postings(store._db, "files_fts", [term], None)[term]
            got = kept_postings.per_file(*kept_postings.decode([blob]), file_docs)
            assert [a.tolist() for a in got] == [sorted(expected[0].tolist()), *[b.tolist() for b in _by_doc(expected)]]


def _by_doc(postings: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(postings[0])
    return postings[1][order], postings[2][order]


@pytest.mark.parametrize("seed", range(4))
def test_many_terms_encode_in_slices_as_one_by_one(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kept_postings, "SLICE_POSTINGS", 7)  # terms cut into many slices, one term larger than a slice
    rng = np.random.default_rng(seed)
    n = 300
    term = rng.integers(0, 40, n)
    term[:20] = 41
    docs = rng.integers(0, 10**6, n) * 64 + term  # (term, document) pairs distinct
    in_path = np.where(rng.random(n) < 0.2, rng.integers(1, 4, n), 0)
    in_text = rng.integers(0, 300, n)
    terms, blobs = kept_postings.encode_by_term(term, docs, in_path, in_text)
    assert terms.tolist() == sorted(set(term.tolist()))
    for t, blob in zip(terms.tolist(), blobs, strict=True):
        mine = term == t
        order = np.argsort(docs[mine])
        got = kept_postings.decode([blob])
        assert got[0].tolist() == docs[mine][order].tolist()
        assert got[1].tolist() == in_path[mine][order].tolist() and got[2].tolist() == in_text[mine][order].tolist()


def test_a_process_opening_a_moved_index_holds_its_writes_from_an_empty_fts5(sample_repo: Path, open_sqlite_index,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process (a watcher, the next CLI run) starts holding what it writes once FTS5 is
    empty, so its next move encodes from memory too; while FTS5 still has rows it does not."""
    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 4)
    monkeypatch.setattr(sqlite.schema, "FOLD_CHUNKS", 1)
    first = open_sqlite_index(sample_repo)
    first.refresh()
    assert first.store._kept_through() > 0
    first.close()
    again = open_sqlite_index(sample_repo)
    assert again.store._pending is None
    cart = sample_repo / "src/shop/cart.py"
    cart.write_text(cart.read_text() + "\n\ndef loyalty_points(total):\n    return int(total // 10)\n")
    bump_mtime(cart)
    monkeypatch.setattr(sqlite.schema, "FOLD_CHUNKS", 10_000)  # the edit stays in FTS5
    again.refresh()
    assert again.store._pending is not None and again.store._pending.files, "held from the empty FTS5 on"
    found = again.store.keyword_search(TermQuery(("loyalty",)), 5, Filters())
    assert found and again.store._kept_through() < found[0][0]


def test_a_large_first_build_moves_from_its_start_and_settles_at_its_end(sample_repo: Path, open_sqlite_index,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Past HOLD_FROM_BYTES of files a first build moves its rows every FOLD_CHUNKS chunks, before
    the index turns compact, and what is left at its end once SETTLE_CHUNKS or more."""
    monkeypatch.setattr(sqlite.schema, "HOLD_FROM_BYTES", 1)
    monkeypatch.setattr(sqlite.schema, "FOLD_CHUNKS", 5)
    monkeypatch.setattr(sqlite.schema, "SETTLE_CHUNKS", 1)
    monkeypatch.setattr(indexer, "BATCH_FILES", 2)
    index = open_sqlite_index(sample_repo)
    index.refresh()
    store = index.store
    assert sqlite.schema.COMPACT not in store.meta(), "small: never compact, yet moved"
    assert store._db.execute("SELECT count(DISTINCT part) FROM kept_postings").get >= 2
    assert store._db.execute("SELECT count(*) FROM chunks_fts_docsize").get == 0, "the end of the run moved the rest"
    assert store._db.execute("PRAGMA freelist_count").get == 0, "and gave back the pages FTS5 freed"
    assert store._kept_through() == store._db.execute("SELECT max(id) FROM chunks").get
    assert store.keyword_search(TermQuery(("cart",)), 5, Filters())
