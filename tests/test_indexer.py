from __future__ import annotations

from pathlib import Path

import pytest

from codewhere import reading
from codewhere.chunk import chunker_version
from tests.conftest import bump_mtime, write_tree


def test_first_index_then_unchanged_refresh_reads_nothing(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo)
    first = index.refresh()
    assert first.files_added == 8 and first.chunks_written == index.status().chunks > 8
    again = index.refresh()
    assert (again.files_added, again.files_changed, again.files_removed, again.bytes_read) == (0, 0, 0, 0)
    assert again.files_unchanged == 8


def test_touched_but_identical_file_is_read_not_rechunked(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo)
    index.refresh()
    bump_mtime(sample_repo / "src/lib.rs")
    report = index.refresh()
    assert report.bytes_read == (sample_repo / "src/lib.rs").stat().st_size
    assert report.chunks_written == 0 and report.files_changed == 0
    assert index.refresh().bytes_read == 0  # the new mtime was recorded


def test_edit_delete_and_rename_are_seen(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo)
    index.refresh()
    cart = sample_repo / "src/shop/cart.py"
    cart.write_text(cart.read_text() + "\n\ndef apply_voucher_discount(cart, code):\n    return cart\n")
    bump_mtime(cart)
    (sample_repo / "src/lib.rs").unlink()
    (sample_repo / "src/server/router.go").rename(sample_repo / "src/server/routes.go")
    report = index.refresh()
    assert (report.files_changed, report.files_removed, report.files_added) == (1, 2, 1)
    assert [h.path for h in index.search("apply_voucher_discount")][:1] == ["src/shop/cart.py"]
    assert index.search("RateLimiter", mode="keyword") == []
    assert [h.path for h in index.search("HandleLogin", mode="keyword")] == ["src/server/routes.go"]


def test_file_turning_binary_leaves_the_index_and_is_not_reread(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo)
    index.refresh()
    (sample_repo / "src/lib.rs").write_bytes(b"\0\0binary now")
    report = index.refresh()
    assert report.skipped["binary"] == 1
    assert index.search("parse_config", mode="keyword") == []
    again = index.refresh()
    assert again.bytes_read == 0 and again.skipped["binary"] == 1


def test_new_ignore_rule_removes_files_from_the_index(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo)
    index.refresh()
    (sample_repo / ".codewhereignore").write_text("docs/\n")
    report = index.refresh()
    assert report.files_removed == 1
    assert all(not h.path.startswith("docs/") for h in index.search("charge_credit_card", k=20))


def test_chunker_version_change_rechunks_everything(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo)
    index.refresh()
    with index.store.transaction():
        index.store.set_meta({"chunker_version": "old"})
    report = index.refresh()
    assert report.files_added == 8 and report.chunks_written > 0
    assert report.vectors_written == 0  # the same texts: their vectors are kept, nothing is embedded again
    assert index.store.meta()["chunker_version"] == chunker_version("symbols")


def test_failure_mid_batch_keeps_last_committed_state(sample_repo: Path, open_index, monkeypatch) -> None:
    index = open_index(sample_repo)
    index.refresh()
    before = index.status()
    for rel in ("src/shop/cart.py", "src/shop/payment.py"):
        path = sample_repo / rel
        path.write_text("def replaced_everything():\n    pass\n")
        bump_mtime(path)
    real_chunk_source = reading.chunk_source
    calls = []

    def failing_chunk_source(record, text, symbols, chunker):
        calls.append(record.path)
        if len(calls) == 2:
            raise RuntimeError("killed")
        return real_chunk_source(record, text, symbols, chunker)

    monkeypatch.setattr(reading, "chunk_source", failing_chunk_source)
    with pytest.raises(RuntimeError):
        index.refresh()
    after = index.status()
    assert after.chunks == before.chunks and after.files == before.files
    assert index.search("replaced_everything", mode="keyword") == []
    assert [h.path for h in index.search("charge_credit_card")][0] == "src/shop/payment.py"
    monkeypatch.setattr(reading, "chunk_source", real_chunk_source)
    assert index.refresh().files_changed == 2


def test_unchanged_refresh_of_a_thousand_files_opens_none(tmp_path: Path, open_index) -> None:
    write_tree(tmp_path, {f"pkg{i % 20}/mod{i}.py": f"def function_{i}():\n    return {i}\n" for i in range(1000)})
    index = open_index(tmp_path)
    index.refresh()
    report = index.refresh()
    assert report.files_unchanged == 1000 and report.bytes_read == 0


def test_unchanged_refresh_writes_nothing(sample_repo: Path, open_sqlite_index) -> None:
    """A search refreshes first; on an unchanged folder that must not write to the index."""
    import apsw

    from codewhere.embed.fake import FakeEmbedder

    index = open_sqlite_index(sample_repo, embedder=FakeEmbedder())
    index.refresh()
    watcher = apsw.Connection(str(index.store.path))
    before = watcher.execute("PRAGMA data_version").fetchone()[0]
    index.refresh()
    index.search("cart")
    assert watcher.execute("PRAGMA data_version").fetchone()[0] == before
    (sample_repo / "src/lib.rs").write_text("pub fn changed() {}\n")
    bump_mtime(sample_repo / "src/lib.rs")
    index.refresh()
    assert watcher.execute("PRAGMA data_version").fetchone()[0] != before


def test_a_refresh_of_named_paths_commits_once_and_leaves_every_chunk_with_a_vector(
    sample_repo: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codewhere.store.sqlite import SqliteStore

    index = open_sqlite_index(sample_repo)
    index.refresh()
    cart = sample_repo / "src/shop/cart.py"
    cart.write_text(cart.read_text() + "\n\ndef apply_voucher_discount(cart, code):\n    return cart\n")
    (sample_repo / "src/lib.rs").unlink()
    (sample_repo / "src/new_module.py").write_text("def brand_new_helper():\n    return 42\n")
    commits = []
    inner = SqliteStore.transaction

    def counted(self: SqliteStore):
        if self._db.getautocommit():
            commits.append(1)
        return inner(self)

    monkeypatch.setattr(SqliteStore, "transaction", counted)
    report = index.refresh(paths=["src/shop/cart.py", "src/lib.rs", "src/new_module.py", "src/absent.py"])
    monkeypatch.undo()
    assert (report.files_changed, report.files_removed, report.files_added) == (1, 1, 1)
    assert len(commits) == 1  # files, vectors and edges together: readers never see half of it
    assert index.store.count_chunks_without_vectors() == 0
    with index.store.transaction():
        assert index.store.delete_orphan_vectors() == 0  # the targeted clean-up missed none
    again = index.refresh()  # the whole walk agrees there is nothing left to do
    assert (again.files_added, again.files_changed, again.files_removed, again.bytes_read) == (0, 0, 0, 0)
    assert index.search("brand_new_helper", k=1)[0].path == "src/new_module.py"


def test_a_changed_ignore_file_among_the_paths_makes_a_whole_refresh(sample_repo: Path, open_index) -> None:
    index = open_index(sample_repo)
    index.refresh()
    shop = [p for p in index.store.file_states() if p.startswith("src/shop/")]
    (sample_repo / ".codewhereignore").write_text("src/shop/\n")
    report = index.refresh(paths=[".codewhereignore"])  # the watcher saw only this file change
    assert shop and report.files_removed == len(shop) and report.files_added == 1
    assert not any(p.startswith("src/shop/") for p in index.store.file_states())


def test_new_files_keep_their_keyword_rows_in_memory_until_the_commit_and_a_rewrite_drops_the_old_ones(tmp_path: Path) -> None:
    # a statement that opens a savepoint makes FTS5 write out what it holds: once per file, that
    # was a segment per file to write and merge; new paths are written with plain inserts
    import apsw

    from codewhere.chunk import chunk_source
    from codewhere.store.sqlite import SqliteStore
    from codewhere.tokens import index_tokens
    from codewhere.types import FileKind, FileRecord

    store = SqliteStore.open(tmp_path / "index.db")
    keyword_pages: list[str] = []
    store._db.trace_v2(apsw.SQLITE_TRACE_STMT, lambda event: keyword_pages.append(event["sql"]) if "chunks_fts_data" in event["sql"] and "REPLACE" in event["sql"] else None)

    def write(path: str, word: str) -> None:
        text = f"def {word}():\n    return {word}_value\n"
        record = FileRecord(path, FileKind.CODE, "python", len(text), 0)
        chunks = chunk_source(record, text, None, "window")
        store.replace_file(record, f"digest-{word}", chunks, [(index_tokens(path), index_tokens(c.text)) for c in chunks])

    def matching(word: str) -> list[str]:
        return [path for (path,) in store._db.execute(
            "SELECT f.path FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid JOIN files f ON f.id = c.file_id"
            " WHERE chunks_fts MATCH ? ORDER BY f.path", (word,))]

    with store.transaction():
        for n in range(6):
            write(f"pkg/module{n}.py", f"alpha{n}")
        assert keyword_pages == []  # nothing written out per file
    assert keyword_pages  # the commit wrote them
    assert [matching(f"alpha{n}") for n in range(6)] == [[f"pkg/module{n}.py"] for n in range(6)]
    with store.transaction():
        write("pkg/module0.py", "omega")  # a known path: its old rows go
    assert matching("alpha0") == [] and matching("omega") == ["pkg/module0.py"]
    assert matching("alpha1") == ["pkg/module1.py"]
    # a batch of known paths (a branch switch): their old rows deleted together ahead of the
    # writes, so FTS5 writes out what it holds at most once then, not once per file
    keyword_pages.clear()
    with store.transaction():
        store.forget_contents([f"pkg/module{n}.py" for n in range(1, 6)])
        held = len(keyword_pages)
        for n in range(1, 6):
            write(f"pkg/module{n}.py", f"beta{n}")
        assert len(keyword_pages) == held
    assert [matching(f"alpha{n}") for n in range(1, 6)] == [[]] * 5
    assert [matching(f"beta{n}") for n in range(1, 6)] == [[f"pkg/module{n}.py"] for n in range(1, 6)]
    assert store._db.execute("SELECT count(*) FROM chunks").get == len(matching("omega")) + 5 * len(matching("beta1"))
    # what a rolled-back transaction deleted ahead came back: the next write deletes it again
    try:
        with store.transaction():
            store.forget_contents(["pkg/module1.py"])
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert matching("beta1") == ["pkg/module1.py"]
    with store.transaction():
        write("pkg/module1.py", "gamma")
    assert matching("beta1") == [] and matching("gamma") == ["pkg/module1.py"]
    store.close()


def test_a_refresh_runs_with_the_collector_at_the_build_threshold_and_restores_it(
    sample_repo: Path, open_index, monkeypatch
) -> None:
    import gc

    from codewhere import collector, indexer

    seen: list[tuple[int, int, int]] = []
    real = indexer._file_pass

    def watched(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    monkeypatch.setattr(indexer, "_file_pass", watched)
    before = gc.get_threshold()
    index = open_index(sample_repo)
    index.refresh()
    assert seen and seen[0][0] == max(before[0], collector.BUILD_THRESHOLD) and seen[0][1:] == before[1:]
    assert gc.get_threshold() == before


def test_overlapping_builds_restore_the_collector_once_the_last_ends() -> None:
    import gc

    from codewhere import collector

    before = gc.get_threshold()
    try:
        gc.set_threshold(500, 7, 9)
        first, second = collector.rarely(), collector.rarely()
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        assert gc.get_threshold() == (collector.BUILD_THRESHOLD, 7, 9)  # the second build still runs
        second.__exit__(None, None, None)
        assert gc.get_threshold() == (500, 7, 9)
        gc.set_threshold(50_000, 7, 9)  # a program that collects even less is left as it is
        with collector.rarely():
            assert gc.get_threshold() == (50_000, 7, 9)
        assert gc.get_threshold() == (50_000, 7, 9)
    finally:
        gc.set_threshold(*before)
