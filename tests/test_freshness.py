"""A search's quick check: it stats what the last walk saw instead of walking, and still sees
every edit, addition, removal, rename and rule change."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from codewhere import indexer, scan
from codewhere.api import Index
from codewhere.config import Settings
from tests.conftest import make_tiny_model2vec, run_cli, write_tree

HOUR_NS = 3600 * 10**9


def age(root: Path) -> None:
    """Every folder and file an hour old: no stamp is racily clean (scan.RACY_NS)."""
    past = time.time_ns() - HOUR_NS
    for folder, _, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(folder, name), ns=(past, past))
        os.utime(folder, ns=(past, past))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = write_tree(tmp_path / "repo", {
        "src/app/core.py": "def start_engine():\n    return 'vroom'\n",
        "src/app/util.py": "def helper():\n    return 1\n",
        "src/lib/deep/leaf.py": "def leaf_function():\n    return 2\n",
        "README.md": "# Project\n",
    })
    age(root)
    return root


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each whole walk of the tree, and each folder a walk starts from, in order."""
    seen: list[str] = []
    real_scan, real_walk = indexer.scan, scan._walk

    def counting_scan(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen.append("whole walk")
        return real_scan(*args, **kwargs)

    def counting_walk(stack, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.extend(folder.rel for folder in stack)
        return real_walk(stack, *args, **kwargs)

    monkeypatch.setattr(indexer, "scan", counting_scan)
    monkeypatch.setattr(scan, "_walk", counting_walk)
    return seen


def opened(root: Path) -> Index:
    index = Index.open(root, settings=Settings.from_env())
    index.refresh(vectors=False)
    return index


def test_nothing_changed_lists_no_folder_and_reads_no_file(tree: Path, walks: list[str]) -> None:
    with opened(tree) as index:
        walks.clear()
        report = index.refresh(vectors=False, quick=True)
        assert walks == []
        assert (report.files_unchanged, report.bytes_read, report.changed) == (4, 0, False)


def test_an_edit_is_seen_without_a_walk(tree: Path, walks: list[str]) -> None:
    with opened(tree) as index:
        walks.clear()
        (tree / "src/app/core.py").write_text("def start_engine():\n    return 'electric hum'\n")
        report = index.refresh(vectors=False, quick=True)
        assert walks == [] and report.files_changed == 1
        assert [h.path for h in index.search("electric hum", mode="keyword")] == ["src/app/core.py"]


def test_a_new_file_a_new_folder_and_a_removal_list_only_their_folders(tree: Path, walks: list[str]) -> None:
    with opened(tree) as index:
        walks.clear()
        (tree / "src/lib/deep/fresh.py").write_text("def brand_new_function():\n    pass\n")
        (tree / "src/app/more").mkdir()
        (tree / "src/app/more/extra.py").write_text("def extra_function():\n    pass\n")
        (tree / "src/app/util.py").unlink()
        report = index.refresh(vectors=False, quick=True)
        assert "whole walk" not in walks and sorted(walks) == ["src/app", "src/lib/deep"]  # more/ within app/
        assert (report.files_added, report.files_removed) == (2, 1)
        assert index.search("brand_new_function", mode="keyword")[0].path == "src/lib/deep/fresh.py"
        assert index.search("extra_function", mode="keyword")[0].path == "src/app/more/extra.py"
        assert index.search("helper", mode="keyword") == []
        walks.clear()
        assert index.refresh(vectors=False, quick=True).changed is False


def test_a_renamed_folder_moves_its_files(tree: Path) -> None:
    with opened(tree) as index:
        (tree / "src/lib/deep").rename(tree / "src/lib/shallow")
        report = index.refresh(vectors=False, quick=True)
        assert (report.files_added, report.files_removed) == (1, 1)
        assert index.search("leaf_function", mode="keyword")[0].path == "src/lib/shallow/leaf.py"


def test_a_changed_ignore_file_makes_a_whole_walk(tree: Path, walks: list[str]) -> None:
    (tree / "src/.ignore").write_text("nothing.py\n")
    age(tree)
    with opened(tree) as index:
        walks.clear()
        (tree / "src/.ignore").write_text("lib/\n")  # edited in place: src's own mtime stays
        os.utime(tree / "src", ns=(time.time_ns() - HOUR_NS,) * 2)
        report = index.refresh(vectors=False, quick=True)
        assert walks[0] == "whole walk" and report.files_removed == 1
        assert index.search("leaf_function", mode="keyword") == []


def test_a_folder_changed_as_it_was_listed_is_listed_again(tree: Path, walks: list[str]) -> None:
    os.utime(tree / "src/app", None)  # now: racily clean when the walk lists it
    with opened(tree) as index:
        walks.clear()
        index.refresh(vectors=False, quick=True)
        assert walks == ["src/app"]


def test_a_search_from_the_command_line_sees_an_edit(tree: Path) -> None:
    assert run_cli("index", str(tree)).code == 0
    (tree / "src/lib/deep/leaf.py").write_text("def leaf_function():\n    return 'photosynthesis'\n")
    result = run_cli("search", "photosynthesis", str(tree), "--mode", "keyword", "--json")
    assert result.code == 0, result.err
    assert [hit["path"] for hit in result.json()["hits"]] == ["src/lib/deep/leaf.py"]


def test_a_keyword_search_after_an_edit_leaves_the_next_search_only_its_chunks_to_embed(
    tree: Path, walks: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search without the model (keyword mode) indexes an edit's text; the next search with
    the model embeds the chunks it wrote, found from where they start, not from every chunk
    (8.8 s on the kernel), and with no walk though nothing changed since."""
    with Index.open(tree, settings=Settings.from_env()) as index:
        index.refresh()
        store = index.store
        complete = store.meta()[indexer.VECTORS_COMPLETE]
        (tree / "src/app/core.py").write_text("def start_engine():\n    return 'electric hum of the motor'\n")
        index.refresh(vectors=False, quick=True)  # what `codewhere search --mode keyword` does
        meta = store.meta()
        pending = int(meta[indexer.VECTORS_PENDING])
        assert meta[indexer.VECTORS_COMPLETE] == complete and store.count_chunks_without_vectors() > 0
        asked: list[int] = []
        real = store.chunks_without_vectors
        monkeypatch.setattr(store, "chunks_without_vectors",
                            lambda limit, after_id=0: asked.append(after_id) or real(limit, after_id))
        walks.clear()
        index.refresh(quick=True)
        assert walks == [] and asked and min(asked) == pending - 1
        assert store.count_chunks_without_vectors() == 0 and store.meta()[indexer.VECTORS_PENDING] == ""
        with store.transaction():
            assert store.delete_orphan_vectors() == 0  # the edit's old text lost its vector with it
        assert index.search("electric hum of the motor", mode="semantic")[0].path == "src/app/core.py"


def test_a_removal_alone_is_no_empty_folder(tree: Path) -> None:
    """A search after deleting one file: the files the quick check vouches for still count."""
    with opened(tree) as index:
        (tree / "src/app/util.py").unlink()
        report = index.refresh(vectors=False, quick=True)
        assert (report.files_removed, report.files_kept, report.files_unchanged) == (1, 3, 3)
        assert index.search("helper", mode="keyword") == []


@pytest.mark.parametrize(("mode", "model"), [("keyword", "default"), ("hybrid", "default"), ("hybrid", "folder")])
def test_a_one_shot_search_answers_from_the_early_search_only_when_the_check_changed_nothing(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, model: str
) -> None:
    """`run_fresh` searches while the quick check runs; that answer is thrown away when the
    check refreshed something (an edit), and kept otherwise (one search, not two). A model
    folder's id is known once it is loaded: it is loaded before the search starts."""
    from codewhere.api import SearchRequest

    if model == "folder":
        monkeypatch.setenv("CODEWHERE_MODEL", str(make_tiny_model2vec(tmp_path / "tiny")))
    index = Index.open(tree, settings=Settings.from_env())
    index.refresh(vectors=mode != "keyword")
    searches: list[str] = []
    real_run = Index.run

    def counting_run(self: Index, request: SearchRequest) -> list:
        searches.append(request.query)
        return real_run(self, request)

    monkeypatch.setattr(Index, "run", counting_run)
    vectors = mode != "keyword"
    request = SearchRequest("photosynthesis", k=3, mode=mode)
    before = index.run_fresh(request, vectors=vectors)
    assert not before if mode == "keyword" else before  # no file has the word yet
    assert len(searches) == 1  # nothing changed: the early answer stands
    (tree / "src/lib/deep/leaf.py").write_text("def leaf_function():\n    return 'photosynthesis'\n")
    hits = index.run_fresh(request, vectors=vectors)
    assert hits and hits[0].path == "src/lib/deep/leaf.py" and "photosynthesis" in hits[0].snippet
    assert len(searches) == 3  # the early answer predates the edit: searched again
    index.close()


def test_the_quick_check_reads_every_file_as_its_state_says_on_each_store(tree: Path, open_index, walks: list[str]) -> None:
    """`file_stamps` (what the quick check compares with a stat) agrees with `file_states`, and a
    quick refresh finds an edit and a removal from it, on SQLite and PostgreSQL."""
    index = open_index(tree)
    index.refresh(vectors=False)
    store = index.store
    states = store.file_states()
    assert sorted(store.file_stamps()) == sorted((path, s.size, s.mtime_ns, s.skip_reason) for path, s in states.items())
    (tree / "src/app/core.py").write_text("def start_engine():\n    return 'a quiet electric hum'\n")
    (tree / "src/app/util.py").unlink()
    walks.clear()
    report = index.refresh(vectors=False, quick=True)
    assert "whole walk" not in walks  # the quick check found both: only their folder was walked
    assert (report.files_changed, report.files_removed, report.files_unchanged) == (1, 1, 2)
    assert [h.path for h in index.search("quiet electric hum", mode="keyword")][:1] == ["src/app/core.py"]
