"""A warm reader keeps every chunk's row in memory for a process that searches many times, over
either store: the same answers as reading the store, and never an answer from before the index
changed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from codewhere.chunk import chunk_source, text_offsets
from codewhere.embed.fake import FakeEmbedder
from codewhere.store import warm
from codewhere.store.warm import WarmReader
from codewhere.types import FileKind, FileRecord, Filters, ModelInfo, TermQuery
from tests.conftest import bump_mtime

NEW_FUNCTION = "def shipping_label_printer(order):\n    return f'label for {order}'\n"


def _all_ids(store) -> list[int]:  # noqa: ANN001
    return sorted(row[0] for _, row in store.rows_of_files(None))


def _read_afresh(index) -> dict:  # noqa: ANN001
    """Every chunk row as the store reads it, without memory."""
    return index.store.chunk_rows(_all_ids(index.store), Filters())


def _reader(index) -> WarmReader:  # noqa: ANN001
    assert isinstance(index.reader, WarmReader), "the index was opened warm"
    return index.reader


def _edit(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    bump_mtime(path)


def test_kept_chunks_read_the_same_as_the_store(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo, embedder=FakeEmbedder(), warm=True)
    index.refresh()
    store, reader = index.store, _reader(index)
    ids = _all_ids(store)
    from_store = (store.chunk_rows(ids, Filters()), store.call_target_chunks(ids))
    assert from_store[1], "the sample's test calls charge_credit_card: there must be a call target to compare"
    from_memory = (reader.chunk_rows(ids, Filters()), reader.call_target_chunks(ids))
    kept = reader.chunks()
    assert kept is not None and len(kept.rows) == len(ids)
    assert from_memory == from_store


def test_call_targets_kept_in_memory_follow_a_change_of_the_index(sample_repo: Path, open_index) -> None:
    """Call targets are kept between searches; a change anywhere (here the called function
    renamed in another file) can resolve a call again, so what was kept is read anew."""
    index = open_index(sample_repo, embedder=FakeEmbedder(), warm=True)
    index.refresh()
    store, reader = index.store, _reader(index)
    ids = _all_ids(store)
    before = reader.call_target_chunks(ids)
    assert before and reader.call_target_chunks(ids) == before == store.call_target_chunks(ids)
    payment = sample_repo / "src/shop/payment.py"
    _edit(payment, payment.read_text(encoding="utf-8").replace("def charge_credit_card", "def charge_debit_card"))
    index.refresh()
    ids = _all_ids(store)
    after = store.call_target_chunks(ids)
    assert after != before
    assert reader.call_target_chunks(ids) == after
    assert reader.call_target_chunks(ids[:1]) == {i: t for i, t in after.items() if i == ids[0]}


def test_keyword_postings_in_memory_answer_as_the_store(sample_repo: Path, open_index, store_kind: str) -> None:
    index = open_index(sample_repo, embedder=FakeEmbedder(), warm=True)
    index.refresh()
    store, reader = index.store, _reader(index)
    words = sorted({w.lower() for row in _read_afresh(index).values() for w in row.text.split() if w.isalpha()})
    queries = [TermQuery(tuple(words[i:i + n]), field_weights=(2.0, 1.0)) for n in (1, 3) for i in range(0, len(words), 7)]
    queries.append(TermQuery(("cart", "payment", "src"), field_weights=(2.0, 1.0)))  # path and text
    assert reader._keywords() is None  # the first ask starts the build; the store answers meanwhile
    if store_kind == "postgres":  # ts_rank is not bm25: PostgreSQL keeps answering
        assert not reader.keywords_built.wait(0.5) and reader._held_keywords is None
        return
    assert reader.keywords_built.wait(20)
    held = reader._keywords()
    assert held is not None
    for query in queries:
        from_store = store.keyword_search(query, 30, Filters())
        from_memory = held.search(query.terms, query.field_weights, 30)
        assert [c for c, _ in from_memory] == [c for c, _ in from_store], query
        assert [s for _, s in from_memory] == pytest.approx([s for _, s in from_store], rel=1e-9)
        # each file as one document (file-words): the same files and scores as files_fts
        files_in_store = store.file_keyword_search(query, 1000, Filters())
        files_in_memory = held.file_search(query.terms, query.field_weights, 1000)
        assert set(files_in_memory) == set(files_in_store), query
        assert [files_in_memory[f] for f in files_in_store] == pytest.approx(list(files_in_store.values()), rel=1e-9)
    # an edit: the store answers until the postings of the new state are built, then memory does
    _edit(sample_repo / "src/shop/cart.py", NEW_FUNCTION)
    index.refresh()
    reader.keywords_built.clear()
    asked = TermQuery(("shipping", "label", "printer"))
    assert reader.keyword_search(asked, 5, Filters()) == store.keyword_search(asked, 5, Filters())
    assert reader.keywords_built.wait(20)
    rebuilt = reader._keywords()
    assert rebuilt is not None and rebuilt is not held
    assert [c for c, _ in rebuilt.search(asked.terms, (1.0, 1.0), 5)] == [c for c, _ in store.keyword_search(asked, 5, Filters())]


def test_a_one_shot_index_keeps_nothing_and_answers_as_a_warm_one(sample_repo: Path, open_sqlite_index, tmp_path: Path) -> None:
    index_file = tmp_path / "index.sqlite"
    index = open_sqlite_index(sample_repo, index_path=index_file, embedder=FakeEmbedder())
    index.refresh()
    warm_index = open_sqlite_index(sample_repo, index_path=index_file, embedder=FakeEmbedder(), warm=True)
    for query in ("cart total", "charge a credit card", "refund_payment"):
        assert index.search(query) == warm_index.search(query)
    assert index.reader is index.store  # a `codewhere search` never pays the load
    assert _reader(warm_index).chunks() is not None


def test_filters_still_apply_to_kept_chunks(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo, embedder=FakeEmbedder(), warm=True)
    index.refresh()
    reader = _reader(index)
    ids = _all_ids(index.store)
    scoped = reader.chunk_rows(ids, Filters(scopes=("src/shop",)))
    assert scoped and all(row.path.startswith("src/shop/") for row in scoped.values())
    no_tests = reader.chunk_rows(ids, Filters(exclude_kinds=(FileKind.TEST,)))
    assert no_tests and all(row.kind is not FileKind.TEST for row in no_tests.values())
    assert len(no_tests) < len(ids)
    assert reader.chunk_rows(ids, Filters(repos=("another-repo",))) == {}
    assert len(reader.chunk_rows(ids, Filters(repos=(index.store.repo,)))) == len(ids)
    assert reader.chunks() is not None


def test_an_edit_after_the_chunks_were_kept_is_searched(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo, embedder=FakeEmbedder(), warm=True)
    index.refresh()
    index.search("refund payment")
    kept = _reader(index).chunks()
    assert kept is not None
    untouched = {cid: row for cid, row in kept.rows.items() if row.path == "src/shop/cart.py"}
    _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION)
    (sample_repo / "src/lib.rs").unlink()
    (sample_repo / "src/shop/labels.py").write_text("def print_label():\n    return 'label'\n", encoding="utf-8")
    index.refresh()
    hits = index.search("shipping_label_printer")
    kept = _reader(index).chunks()
    assert kept is not None and kept.rows == _read_afresh(index)
    assert untouched and all(kept.rows[cid] is row for cid, row in untouched.items())  # not reread
    assert hits[0].path == "src/shop/payment.py" and "label for" in hits[0].snippet
    gone = [hit for hit in index.search("refund payment") if hit.path == "src/shop/payment.py" and "refund" in hit.snippet]
    assert not gone


def test_definitions_in_memory_answer_as_the_store_through_edits(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo, embedder=FakeEmbedder(), warm=True)
    index.refresh()
    store, reader = index.store, _reader(index)

    def compare() -> None:
        assert reader.chunks() is not None  # answered from memory, not passed through to the store
        rows = _read_afresh(index).values()
        defined = {n for row in rows for n in row.defines}
        assert defined, "the sample defines names"
        names = sorted(defined | {"nosuchname"})
        spelled = sorted({s for row in rows for s in row.spelled})
        for filters in (Filters(), Filters(exclude_kinds=(FileKind.TEST,)), Filters(repos=(store.repo,))):
            assert reader.chunks_defining_names(names, filters) == store.chunks_defining_names(names, filters)
            for written in spelled:  # a capitalised name finds only its exact spelling
                assert (reader.chunks_defining_names(names, filters, [written])
                        == store.chunks_defining_names(names, filters, [written]))

    compare()
    _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION + "class Label:\n    pass\n")
    (sample_repo / "src/lib.rs").unlink()
    (sample_repo / "src/shop/labels.py").write_text("def label():\n    return 'label'\n", encoding="utf-8")
    index.refresh()
    compare()
    assert reader.chunks_defining_names(["label"], Filters(), ["Label"]) == store.chunks_defining_names(
        ["label"], Filters(), ["Label"]) != reader.chunks_defining_names(["label"], Filters())


def test_a_commit_by_another_process_is_seen(sample_repo: Path, open_index, tmp_path: Path) -> None:
    index_file = tmp_path / "shared.sqlite"  # the postgres run shares its database instead
    reader = open_index(sample_repo, index_path=index_file, embedder=FakeEmbedder(), warm=True)
    reader.refresh()
    reader.search("cart", mode="keyword")
    assert _reader(reader).chunks() is not None
    writer = open_index(sample_repo, index_path=index_file, embedder=FakeEmbedder())
    _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION)
    writer.refresh()
    # keyword search finds the new chunk in the store; its text must come from the new state too
    hits = reader.search("shipping_label_printer", mode="keyword")
    assert hits and hits[0].path == "src/shop/payment.py" and "label for" in hits[0].snippet


def test_a_rebuild_in_this_process_is_seen(sample_repo: Path, open_index) -> None:
    """SQLite copies a rebuild over the live file with its backup API, which moves neither of the
    connection's change counters: the reader must still reread."""
    index = open_index(sample_repo, embedder=FakeEmbedder(), warm=True)
    index.refresh()
    index.search("refund payment")
    _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION)
    index.refresh(rebuild=True)
    hits = index.search("shipping_label_printer", mode="keyword")
    assert hits and "label for" in hits[0].snippet
    kept = _reader(index).chunks()
    assert kept is not None and kept.rows == _read_afresh(index)


def test_an_index_past_the_memory_limit_is_read_per_query(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder())
    index.refresh()
    first = index.search("charge a credit card")
    monkeypatch.setattr(warm, "WARM_TEXT_LIMIT", 100)
    again = open_sqlite_index(sample_repo, embedder=FakeEmbedder(), warm=True)
    answers = [again.search("charge a credit card") for _ in range(2)]
    assert _reader(again).refused and _reader(again).chunks() is None
    assert answers[0] == answers[1] == first


def test_an_index_past_the_chunk_limit_is_read_per_query(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder(), warm=True)
    index.refresh()
    monkeypatch.setattr(warm, "WARM_CHUNK_LIMIT", 3)
    reader = _reader(index)
    assert reader.chunk_rows(_all_ids(index.store), Filters()) == _read_afresh(index)
    assert reader.refused and reader.chunks() is None  # asked again: still no


def test_a_rechunked_index_is_read_again_whole(sample_repo: Path, open_sqlite_index, tmp_path: Path) -> None:
    """Re-chunking deletes every chunk and may hand the same ids to new ones: all is reread."""
    index_file = tmp_path / "shared.sqlite"
    reader = open_sqlite_index(sample_repo, index_path=index_file, embedder=FakeEmbedder(), warm=True)
    reader.refresh()
    kept = _reader(reader).chunks()
    assert kept is not None
    before = dict(kept.rows)
    open_sqlite_index(sample_repo, index_path=index_file, embedder=FakeEmbedder(), chunker="lines").refresh()
    after = _reader(reader).chunks()
    assert after is not None and after.rows != before and after.rows == _read_afresh(reader)


def test_searches_in_threads_while_the_index_changes(sample_repo: Path, open_sqlite_index) -> None:
    """MCP calls run in worker threads on one index: updates of the kept chunks must not mix."""
    from concurrent.futures import ThreadPoolExecutor

    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder(), warm=True)
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
    kept = _reader(index).chunks()
    assert kept is not None and kept.rows == _read_afresh(index)


def _agree(index) -> None:  # noqa: ANN001
    """The real model (the fake one makes exact ties, which each search may break its own way)."""
    for query in ("charge a credit card", "cart total price", "route handler", "user login"):
        vector = index.embedder().embed_query(query)
        held = _reader(index).vector_search(vector, 12, Filters())
        stored = index.store.vector_search(vector, 12, Filters())
        assert [c for c, _ in held] == [c for c, _ in stored], query
        assert all(abs(a - b) < 1e-5 for (_, a), (_, b) in zip(held, stored, strict=True))


def test_vectors_held_in_memory_answer_as_the_stores_search_through_edits_deletes_and_a_rebuild(
    sample_repo: Path, open_sqlite_index
) -> None:
    index = open_sqlite_index(sample_repo, warm=True)
    index.refresh()
    _agree(index)
    held = _reader(index)._held_vectors
    assert held is not None and len(held.ids) == index.store.vector_count()
    _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION)  # new texts; the old ones dropped
    index.refresh()
    _agree(index)
    for path in ("src/shop/cart.py", "src/lib.rs", "src/server/router.go", "docs/guide.md"):
        (sample_repo / path).unlink()
    index.refresh()
    _agree(index)
    held = _reader(index)._held_vectors
    assert held is not None and held.alive.all() and len(held.ids) == index.store.vector_count()  # rebuilt when a quarter died
    index.refresh(rebuild=True)  # a new file: the same ids may now mean other texts
    _agree(index)
    vector, scope = index.embedder().embed_query("payment"), Filters(scopes=("src/shop",))
    assert _reader(index).vector_search(vector, 5, scope) == index.store.vector_search(vector, 5, scope)  # the store's


def _agree_roughly(index) -> None:  # noqa: ANN001
    """Quantized vectors: about the store's nearest texts, at about its similarities."""
    for query in ("charge a credit card", "cart total price", "route handler", "user login"):
        vector = index.embedder().embed_query(query)
        held = dict(_reader(index).vector_search(vector, 12, Filters()))
        stored = dict(index.store.vector_search(vector, 12, Filters()))
        assert len(held) == len(stored) and len(held.keys() & stored.keys()) >= min(10, len(stored)), query
        assert all(abs(held[c] - stored[c]) < 0.02 for c in held.keys() & stored.keys()), query


def test_vectors_past_the_exact_limit_are_held_quantized_through_edits_and_deletes(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warm, "EXACT_VECTOR_LIMIT", 0)
    monkeypatch.setattr(warm, "VECTOR_PAGE", 3)  # read in many pages
    index = open_sqlite_index(sample_repo, warm=True)
    index.refresh()
    _agree_roughly(index)
    held = _reader(index)._held_vectors
    assert held is not None and held.quantized is not None and len(held.matrix) == 0
    assert len(held.ids) == len(held.quantized) == index.store.vector_count()
    _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION)
    index.refresh()
    _agree_roughly(index)
    for path in ("src/shop/cart.py", "src/lib.rs", "src/server/router.go", "docs/guide.md"):
        (sample_repo / path).unlink()
    index.refresh()
    _agree_roughly(index)
    held = _reader(index)._held_vectors
    assert held is not None and held.quantized is not None and held.alive.all()
    assert len(held.ids) == len(held.quantized) == index.store.vector_count()


def test_an_index_past_the_quantize_limit_searches_its_stored_quantized_vectors_as_the_warm_reader_does(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-shot search of a large index reads the sign pages and byte codes the index keeps
    instead of float32 vectors (sqlite.py): the same answers as a warm reader holding them, kept
    so through edits, deletions and a rebuild, and dropped with the model."""
    from codewhere.store import quantized, sqlite

    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 12)
    monkeypatch.setattr(warm, "EXACT_VECTOR_LIMIT", 0)
    monkeypatch.setattr(sqlite.schema, "SIGN_PAGE", 8)  # vectors over many pages
    monkeypatch.setattr(quantized, "SHORTLIST_MIN", 3)  # a gone vector kept in it would push out a live one
    monkeypatch.setattr(quantized, "SHORTLIST_PER_RESULT", 1)
    embedded: dict[int, np.ndarray] = {}  # vector id -> the float32 vector the model made
    write = sqlite.SqliteStore._write_quantized

    def spy(self, ids: np.ndarray, matrix: np.ndarray) -> None:  # noqa: ANN001
        embedded.update(zip(ids.tolist(), matrix, strict=True))
        write(self, ids, matrix)

    monkeypatch.setattr(sqlite.SqliteStore, "_write_quantized", spy)
    index = open_sqlite_index(sample_repo, warm=True)
    index.refresh()

    def stored_as_computed() -> None:
        stored = index.store.quantized_after(0, 10_000)
        assert stored is not None
        ids, held = stored
        assert ids.tolist() == sorted(index.store.vector_ids().tolist())
        made = quantized.QuantizedVectors.of(np.stack([embedded[i] for i in ids.tolist()]))
        for mine, theirs in zip((held.words, held.codes, held.scales, held.norms),
                                (made.words, made.codes, made.scales, made.norms), strict=True):
            assert np.array_equal(mine, theirs)
        read_ids, matrix = index.store.vectors_after(0, 10_000)  # what the codes stand for
        assert read_ids.tolist() == ids.tolist() and np.array_equal(matrix, held.codes * held.scales[:, None])
        assert index.store._db.execute("SELECT count(*) FROM vec_chunks").get == 0  # no float32 copy kept

    def same_answers() -> None:
        for query in ("charge a credit card", "cart total price", "route handler", "user login", "parse json"):
            vector = index.embedder().embed_query(query)
            for k in (1, 5, 12):
                assert index.store.vector_search(vector, k, Filters()) == _reader(index).vector_search(vector, k, Filters())
        # a filtered search: the nearest of the chunks the filter lets through, by their codes
        scope = Filters(scopes=("src",))
        vector = index.embedder().embed_query("payment")
        rows = index.store.chunk_rows(_all_ids(index.store), scope)
        ids, held = index.store.quantized_after(0, 10_000)
        distance = dict(zip(ids.tolist(), quantized.code_distances(held.codes, held.scales, held.norms, vector).tolist(), strict=True))
        of_chunk = dict((c, v) for v, c in index.store.chunks_of_vectors(ids.tolist()))
        expected = sorted((distance[of_chunk[c]], c) for c in rows if c in of_chunk)[:5]
        with monkeypatch.context() as wide:
            wide.setattr(quantized, "SHORTLIST_MIN", 10_000)  # every vector on the shortlist: exact over the codes
            found = index.store.vector_search(vector, 5, scope)
        assert [c for c, _ in found] == [c for _, c in expected] and all(rows[c].path.startswith("src/") for c, _ in found)

    assert index.store.meta().get(sqlite.schema.COMPACT) == "1"
    stored_as_computed()
    same_answers()
    _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION)
    index.refresh()
    stored_as_computed()
    same_answers()
    for path in ("src/shop/cart.py", "src/lib.rs", "docs/guide.md"):
        (sample_repo / path).unlink()
    index.refresh()
    stored_as_computed()
    same_answers()
    assert index.store.vector_count() < 12, "below the limit now: the rebuild does not quantize"
    index.refresh(rebuild=True)
    assert sqlite.schema.COMPACT not in index.store.meta()
    assert index.store.vector_search(index.embedder().embed_query("payment"), 5, Filters())  # sqlite-vec's scan
    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 5)
    index.refresh(rebuild=True)
    stored_as_computed()
    same_answers()
    index.store.bind_model(ModelInfo("another", 8, "f"))
    assert sqlite.schema.COMPACT not in index.store.meta() and index.store.quantized_after(0, 10) is None


def test_quantized_pages_of_a_transaction_rolled_back_are_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from codewhere.store import quantized, sqlite

    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 3)
    store = sqlite.SqliteStore.open(tmp_path / "index.db")
    store.bind_model(ModelInfo("m", 16, "f"))
    rng = np.random.default_rng(3)
    first, rolled_back, last = (rng.normal(size=(n, 16)).astype(np.float32) for n in (3, 2, 1))
    with store.transaction():
        store.add_vectors(["a", "b", "c"], first)
    assert store.meta().get(sqlite.schema.COMPACT) == "1"
    with pytest.raises(RuntimeError), store.transaction():
        store.add_vectors(["d", "e"], rolled_back)
        raise RuntimeError("the batch failed")
    store.add_vectors(["f"], last)  # its own transaction
    stored = store.quantized_after(0, 10)
    assert stored is not None and stored[0].tolist() == [1, 2, 3, 4]
    assert np.array_equal(stored[1].words, quantized.QuantizedVectors.of(np.vstack([first, last])).words)
    (page,) = store._db.execute("SELECT bits FROM vector_signs").fetchone()  # what a one-shot search reads
    live, _ = sqlite.schema._sign_page(page, 8)
    assert np.flatnonzero(live).tolist() == [1, 2, 3, 4]  # id 5 was staged, then rolled back
    query = rng.normal(size=16).astype(np.float32)
    assert len(store.vector_search(query, 10, Filters())) == 0  # no chunk holds these texts: nothing to answer
    store.close()


def test_an_index_turning_compact_cuts_chunk_texts_from_their_files_and_reads_them_back_the_same(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codewhere.store import quantized, sqlite

    index = open_sqlite_index(sample_repo)
    index.refresh()
    before = _read_afresh(index)
    at = index.store.chunk_at("src/shop/cart.py", 3)
    assert sqlite.schema.COMPACT not in index.store.meta()
    assert index.store._db.execute("SELECT count(*) FROM chunks WHERE typeof(text) <> 'text'").get == 0
    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 5)
    _edit(sample_repo / "src/shop/payment.py", NEW_FUNCTION)  # a change adds a vector: the index turns compact
    index.refresh()
    assert index.store.meta().get(sqlite.schema.COMPACT) == "1"
    stored = dict(index.store._db.execute("SELECT typeof(text), count(*) FROM chunks GROUP BY 1").fetchall())
    assert set(stored) == {"null"}, "every text here is a slice of its file: none is kept"
    after = _read_afresh(index)
    kept = {cid: row for cid, row in before.items() if row.path != "src/shop/payment.py"}
    assert kept and all(after[cid] == row for cid, row in kept.items())
    assert any(NEW_FUNCTION.splitlines()[0] in row.text for row in after.values())
    compact_at = index.store.chunk_at("src/shop/cart.py", 3)
    assert at is not None and compact_at is not None and compact_at.embed_text == at.embed_text
    hits = index.search("shipping label printer", k=3)
    assert any(h.path == "src/shop/payment.py" and "shipping_label_printer" in h.snippet for h in hits)


def _chunk_pages_unused(store) -> float:  # noqa: ANN001
    """The share of the chunks table's pages that holds nothing."""
    used, size = store._db.execute("SELECT sum(unused), sum(pgsize) FROM dbstat WHERE name = 'chunks'").fetchone()
    return used / size


def test_an_index_turning_compact_is_repacked_so_its_shrunk_chunk_rows_fill_their_pages(
    tmp_path: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codewhere.store import quantized, sqlite

    def indexed(name: str) -> float:
        repo = tmp_path / name
        (repo / "src").mkdir(parents=True)
        for n in range(40):  # chunk rows rewritten in place without their text leave most of their room
            body = "".join(f"def handler_{n}_{k}(value):\n" + "    value = value + 1  # the same line\n" * 12 for k in range(6))
            (repo / "src" / f"mod{n}.py").write_text(body)
        index = open_sqlite_index(repo)
        index.refresh()
        store = index.store
        assert store.meta().get(sqlite.schema.COMPACT) == "1"
        assert store._db.execute("SELECT count(*) FROM chunks WHERE typeof(text) = 'text'").get == 0
        return _chunk_pages_unused(store)

    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 100)
    packed = indexed("packed")
    monkeypatch.setattr(sqlite.SqliteStore, "_repack", lambda self: None)
    left = indexed("left")
    assert packed < 0.2 < left


def test_a_compact_index_keeps_a_text_it_cannot_cut_and_reads_none_from_a_file_changed_since(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codewhere.store import quantized, sqlite

    monkeypatch.setattr(quantized, "QUANTIZE_FROM", 5)
    index = open_sqlite_index(sample_repo)
    index.refresh()
    store = index.store
    assert store.meta().get(sqlite.schema.COMPACT) == "1"
    rows = _read_afresh(index)
    cart = {cid: row for cid, row in rows.items() if row.path == "src/shop/cart.py"}
    assert cart and all(row.text for row in cart.values())
    # a text the chunker made that is no slice of its file (none of ours today) stays compressed
    text = (sample_repo / "src/shop/payment.py").read_text()
    record = FileRecord("src/shop/payment.py", FileKind.CODE, "python", len(text), 0)
    chunks = chunk_source(record, text, None, "window")
    made = [replace(chunks[0], text="not in the file\n"), *chunks[1:]]
    with store.transaction():
        ids = store.replace_file(record, "d", made, [("p", "b")] * len(made), text_at=text_offsets(text, made))
    kept = store.chunk_rows(ids, Filters())
    assert kept[ids[0]].text == "not in the file\n"
    assert store._db.execute("SELECT typeof(text) FROM chunks WHERE id = ?", (ids[0],)).get == "blob"
    # the digest "d" is not the file's: its other texts are not read from a file they may not match
    assert all(kept[cid].text == "" for cid in ids[1:])
    # a file edited since it was indexed gives no text, never another one
    (sample_repo / "src/shop/cart.py").write_text("# rewritten\n" * 40)
    changed = store.chunk_rows(list(cart), Filters())
    assert changed and all(row.text == "" for row in changed.values())


def test_chunks_of_vectors_are_the_same_from_a_short_list_and_a_long_one(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search's few vector ids go to SQL as parameters, a long list as JSON: the same pairs."""
    from codewhere.store import sqlite

    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder())
    index.refresh()
    ids = sorted(int(i) for i in index.store.vector_ids())
    assert len(ids) > 3
    as_parameters = sorted(index.store.chunks_of_vectors(ids))
    monkeypatch.setattr(sqlite.schema, "_LISTED_IDS", 2)
    assert sorted(index.store.chunks_of_vectors(ids)) == as_parameters
    assert {vector for vector, _ in as_parameters} == set(ids)  # every stored vector has a chunk
