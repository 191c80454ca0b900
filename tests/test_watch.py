"""The file watcher with real files, a real watch (inotify through watchfiles) and real git.

Every wait polls for the expected state with a deadline; the only fixed waits are the windows
in which something must *not* happen."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from codewhere.api import Index
from codewhere.config import Settings
from codewhere.indexer import IndexReport
from codewhere.watch import UNAVAILABLE, WATCHING, Watcher
from codewhere.workspace import Workspace
from tests.conftest import SAMPLE_REPO, write_tree

DEADLINE = 20.0
QUIET_WINDOW = 0.6  # several times the watcher's quiet step: long enough for a wrong refresh to show


def eventually(check: Callable[[], object], what: str, deadline: float = DEADLINE) -> object:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if result := check():
            return result
        time.sleep(0.02)
    raise AssertionError(f"not within {deadline:.0f} s: {what}")


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[Callable[..., tuple[Watcher, Index, list[IndexReport]]]]:
    """Starts a watcher on a folder and a warm reader beside it, as the MCP server has them."""
    started: list[tuple[Watcher, Index]] = []

    def start(root: Path) -> tuple[Watcher, Index, list[IndexReport]]:
        reports: list[IndexReport] = []
        watcher = Watcher(root, lambda: Index.open(root, settings=Settings.from_env()), on_report=reports.append).start()
        assert watcher.wait_ready(timeout=120), watcher.status
        reader = Index.open(root, settings=Settings.from_env(), warm=True)
        started.append((watcher, reader))
        return watcher, reader, reports

    yield start
    for watcher, reader in started:
        watcher.stop()
        reader.close()


def found(reader: Index, name: str) -> str | None:
    hits = reader.search(name, k=1, mode="keyword")
    return hits[0].path if hits and name in hits[0].snippet else None


def test_a_saved_file_becomes_searchable_and_a_deleted_one_leaves(tmp_path: Path, watched) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    watcher, reader, reports = watched(root)
    assert watcher.status.state == WATCHING and reports[0].files_added == len(SAMPLE_REPO)
    (root / "src/shop/coupons.py").write_text("def redeem_platypus_coupon(code):\n    return code\n")
    assert eventually(lambda: found(reader, "redeem_platypus_coupon"), "the new file is found") == "src/shop/coupons.py"
    cart = root / "src/shop/cart.py"
    cart.write_text(cart.read_text() + "\n\ndef weigh_wombat_parcel(cart):\n    return 1\n")
    eventually(lambda: found(reader, "weigh_wombat_parcel"), "an edit is found")
    (root / "src/shop/coupons.py").unlink()
    eventually(lambda: found(reader, "redeem_platypus_coupon") is None, "the deleted file is gone")
    assert all(r.files_added + r.files_changed + r.files_removed <= 1 for r in reports[1:])  # one path each time


def test_ignored_folders_cost_no_refresh_even_when_thousands_of_files_change(tmp_path: Path, watched) -> None:
    root = write_tree(tmp_path / "repo", {**SAMPLE_REPO, ".gitignore": "generated/\n"})
    (root / ".git").mkdir()
    watcher, reader, reports = watched(root)
    applied = watcher.status.applied
    for folder in ("node_modules/pkg", "build", ".git/objects/ab"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for i in range(1_000):
            (root / folder / f"f{i}.js").write_text(f"export const v{i} = {i};\n")
    time.sleep(QUIET_WINDOW)
    assert watcher.status.applied == applied  # not one refresh for 3,000 files in built-in folders
    (root / "generated").mkdir()
    for i in range(300):
        (root / "generated" / f"g{i}.py").write_text(f"x{i} = {i}\n")
    (root / "src/marker_module.py").write_text("def ocelot_marker():\n    pass\n")
    eventually(lambda: found(reader, "ocelot_marker"), "the real change is found")
    assert watcher.wait_applied(applied + 1, DEADLINE)
    # the ignored folder's files reached the refresh but none was read or stored
    assert sum(r.files_added for r in reports[1:]) == 1 and sum(r.bytes_read for r in reports[1:]) < 1_000
    assert not any(p.startswith("generated/") for p in reader.store.file_states())


def test_a_git_operation_is_applied_once_git_lets_go_of_its_lock(tmp_path: Path, watched) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    git(root, "init", "-q")
    watcher, reader, reports = watched(root)
    applied = watcher.status.applied
    lock = root / ".git" / "index.lock"
    lock.write_text("")  # what git holds while it rewrites the work tree
    (root / "src/one.py").write_text("def first_of_the_burst():\n    pass\n")
    time.sleep(QUIET_WINDOW)
    (root / "src/two.py").write_text("def second_of_the_burst():\n    pass\n")
    time.sleep(QUIET_WINDOW)
    assert watcher.status.applied == applied and found(reader, "first_of_the_burst") is None
    lock.unlink()
    eventually(lambda: watcher.status.applied > applied, "the burst is applied")
    assert (reports[-1].files_added, watcher.status.applied) == (2, applied + 1)  # both files, one refresh
    assert found(reader, "first_of_the_burst") and found(reader, "second_of_the_burst")


def test_a_branch_switch_in_a_real_repository_is_seen_whole(tmp_path: Path, watched) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "checkout", "-qb", "feature")
    for i in range(40):
        (root / f"src/feature/mod{i}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / f"src/feature/mod{i}.py").write_text(f"def feature_function_{i}():\n    return {i}\n")
    (root / "src/lib.rs").unlink()
    git(root, "add", "-A")
    git(root, "commit", "-qm", "feature")
    git(root, "checkout", "-q", "main")
    watcher, reader, reports = watched(root)
    assert found(reader, "feature_function_7") is None
    applied = watcher.status.applied
    git(root, "checkout", "-q", "feature")
    eventually(lambda: found(reader, "feature_function_39") and found(reader, "feature_function_0"), "the branch's files")
    eventually(lambda: not any(p == "src/lib.rs" for p in reader.store.file_states()), "the removed file goes")
    assert watcher.wait_applied(applied + 1, DEADLINE)  # its report is in (a reader sees the commit just before)
    assert sum(r.files_added for r in reports[1:]) == 40 and sum(r.files_removed for r in reports[1:]) == 1
    status = reader.git_state()
    assert status is not None and status.branch == "feature" and status.dirty is False
    assert reader.store.meta()["git_branch"] == "feature"


def test_without_change_events_the_workspace_checks_the_files_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import watchfiles

    def no_watch(*args: object, **kwargs: object) -> Iterator[set[tuple[object, str]]]:
        raise OSError("OS file watch limit reached")
        yield set()

    monkeypatch.setattr(watchfiles, "watch", no_watch)
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    workspace = Workspace([root])
    try:
        with caplog.at_level(logging.WARNING):
            workspace.watch()
            watcher = workspace._watchers[root.resolve()]
            eventually(lambda: watcher.status.state == UNAVAILABLE, "the watch gives up")
        assert "OS file watch limit reached" in caplog.text and "checks the files instead" in caplog.text
        assert workspace.freshness() == "unavailable: OS file watch limit reached"
        (root / "src/late.py").write_text("def arrived_after_the_start():\n    pass\n")
        index, _ = workspace.index_for()
        assert found(index, "arrived_after_the_start") == "src/late.py"  # checked before answering
    finally:
        workspace.close()


@pytest.mark.parametrize("stop_with", [signal.SIGINT, signal.SIGTERM])
def test_the_watch_command_reports_changes_and_stops_on_interrupt(tmp_path: Path, stop_with: signal.Signals) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    proc = subprocess.Popen([sys.executable, "-m", "codewhere", "watch", str(root)], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env=dict(os.environ))
    try:
        assert proc.stderr is not None
        lines: list[str] = []

        def line_with(text: str) -> str | None:
            line = proc.stderr.readline()  # type: ignore[union-attr]
            lines.append(line)
            return line if text in line else None

        eventually(lambda: line_with("watching"), "the watch starts", 120)
        (root / "src/fresh.py").write_text("def fresh():\n    pass\n")
        assert "repo: 1 added" in str(eventually(lambda: line_with("added"), "the change is reported"))
        asked = time.monotonic()
        proc.send_signal(stop_with)
        assert proc.wait(30) == 0, lines
        # the stop is an event, not an exception raised wherever the main thread was: a second
        # on this machine every time (0.27-0.32 s worst of 40, loaded); 5 s leaves room for a busy CI
        assert time.monotonic() - asked < 5
    finally:
        proc.kill()


def test_watching_a_folder_with_nothing_to_index_says_why_and_fails(tmp_path: Path, cli) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli("watch", str(empty))
    assert result.code == 2
    assert "cannot watch" in result.err and "nothing to index" in result.err and "Traceback" not in result.err


def test_the_watchers_own_index_file_inside_the_tree_is_not_a_change(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    index_file = root / "local-index.sqlite"
    workspace = Workspace([root], index_file=str(index_file))
    try:
        workspace.watch()
        index, _ = workspace.index_for()
        watcher = workspace._watchers[root.resolve()]
        assert watcher.wait_ready(timeout=120)
        applied = watcher.status.applied
        (root / "src/x.py").write_text("def one_real_change():\n    pass\n")
        eventually(lambda: found(index, "one_real_change"), "the change")
        time.sleep(QUIET_WINDOW)
        assert watcher.status.applied == applied + 1  # its own commits did not set off more refreshes
    finally:
        workspace.close()
        shutil.rmtree(root)


def test_status_says_which_branch_and_commit_and_whether_the_work_tree_is_dirty(tmp_path: Path, cli) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    git(root, "init", "-q", "-b", "trunk")
    assert cli("index", str(root)).code == 0
    assert "git: trunk at (no commit yet)" in cli("status", str(root)).out
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    sha = git(root, "rev-parse", "HEAD").strip()
    assert f"git: trunk at {sha[:12]} (the index last changed on" not in cli("status", str(root)).out
    assert cli("index", str(root)).code == 0
    assert f"git: trunk at {sha[:12]}, clean" in cli("status", str(root)).out
    (root / "src/shop/cart.py").write_text("def changed():\n    pass\n")
    data = cli("status", str(root), "--json").json()
    assert data["git"] == {"branch": "trunk", "commit": sha, "dirty": True}


def test_a_second_worktree_takes_its_vectors_from_the_first_and_embeds_only_what_differs(tmp_path: Path) -> None:
    main = write_tree(tmp_path / "main", SAMPLE_REPO)
    git(main, "init", "-q", "-b", "main")
    git(main, "add", "-A")
    git(main, "commit", "-qm", "base")
    git(main, "worktree", "add", "-q", "-b", "topic", str(tmp_path / "topic"))
    topic = tmp_path / "topic"
    with Index.open(main, settings=Settings.from_env()) as first:
        built = first.refresh()
        assert built.vectors_written > 0 and built.vectors_reused == 0
        expected = nearest(first, "charge the credit card")
    (topic / "src/shop/cart.py").write_text("def only_in_the_topic_branch(cart):\n    return cart\n")
    with Index.open(topic, settings=Settings.from_env()) as second:
        assert second.store.location != str(main)
        report = second.refresh()
        assert report.vectors_written == 1  # the one text no index had
        assert report.vectors_reused == second.store.vector_count() - 1 > built.vectors_written // 2
        again = nearest(second, "charge the credit card")
    common = (expected.keys() & again.keys()) - {("src/shop/cart.py", 1)}  # the one file that differs
    assert len(common) >= 3 and all(again[key] == expected[key] for key in common)  # the model's vector, to the bit


def nearest(index: Index, query: str) -> dict[tuple[str, int], float]:
    """The vector search alone: the same texts must score the same in both worktrees."""
    from codewhere.types import Filters

    found = index.store.vector_search(index.embedder().embed_query(query), 12, Filters())
    rows = index.store.chunk_rows([cid for cid, _ in found], Filters())
    return {(rows[cid].path, rows[cid].start_line): score for cid, score in found}


def test_an_unusable_shared_vector_cache_costs_a_warning_not_the_index(
    tmp_path: Path, isolated_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from codewhere.store import shared_vectors

    shared_vectors._said.clear()
    (isolated_cache / "vectors").write_text("a file where the folder should be\n")
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    with caplog.at_level(logging.WARNING), Index.open(root, settings=Settings.from_env()) as index:
        report = index.refresh()
    assert report.vectors_written > 0 and index_has_vectors(root)
    assert caplog.text.count("shared vector cache") == 1 and "embedding without it" in caplog.text


def index_has_vectors(root: Path) -> bool:
    with Index.open(root, settings=Settings.from_env()) as index:
        return index.store.vector_count() > 0


def test_a_network_file_system_is_recognised_from_the_mount_table(tmp_path: Path) -> None:
    from codewhere.watch import network_filesystem

    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/sda1 / ext4 rw 0 0\n"
        "server:/export /mnt/share nfs4 rw,relatime 0 0\n"
        "//nas/code /mnt/my\\040code cifs rw 0 0\n"
        "tmpfs /mnt/share/local tmpfs rw 0 0\n"
    )
    assert network_filesystem(Path("/home/me/repo"), mounts) is None
    assert network_filesystem(Path("/mnt/share/repo"), mounts) == "nfs4"
    assert network_filesystem(Path("/mnt/my code/repo"), mounts) == "cifs"
    assert network_filesystem(Path("/mnt/share/local/repo"), mounts) is None  # the deepest mount decides
    assert network_filesystem(Path("/mnt/shared"), mounts) is None  # a prefix of a name is not a mount
    assert network_filesystem(Path("/x"), tmp_path / "missing") is None


def test_on_a_network_file_system_the_watcher_steps_aside_unless_asked_to_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codewhere import watch

    monkeypatch.setattr(watch, "network_filesystem", lambda path: "nfs4")
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    refused = Watcher(root, lambda: Index.open(root, settings=Settings.from_env())).start()
    assert not refused.wait_ready(timeout=60) and "network file system (nfs4)" in refused.status.detail
    polled = Watcher(root, lambda: Index.open(root, settings=Settings.from_env()), poll=True).start()
    try:
        assert polled.wait_ready(timeout=120)
        (root / "src/polled.py").write_text("def seen_by_polling():\n    pass\n")
        with Index.open(root, settings=Settings.from_env()) as reader:
            eventually(lambda: found(reader, "seen_by_polling"), "a change seen by polling")
    finally:
        polled.stop()


def test_an_editors_atomic_save_and_a_folder_rename_are_followed(tmp_path: Path, watched) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    watcher, reader, _ = watched(root)
    temporary = root / "src/shop/.cart.py.swp-tmp"  # what editors write, then rename over the file
    temporary.write_text("def saved_atomically_by_the_editor():\n    pass\n")
    os.replace(temporary, root / "src/shop/cart.py")
    eventually(lambda: found(reader, "saved_atomically_by_the_editor") == "src/shop/cart.py", "the replaced file")
    (root / "src/shop").rename(root / "src/store")
    eventually(lambda: found(reader, "saved_atomically_by_the_editor") == "src/store/cart.py", "the moved folder")
    eventually(lambda: not any(p.startswith("src/shop/") for p in reader.store.file_states()), "the old paths gone")
    assert not any(".swp-tmp" in p for p in reader.store.file_states())


def test_a_watcher_starting_while_another_process_indexes_catches_up_after_it(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    with Index.open(root, settings=Settings.from_env()) as holder:
        holder.refresh()
        (root / "src/late.py").write_text("def written_before_the_watch():\n    pass\n")
        with holder.store.writer_lock(5.0):  # what a running `codewhere index` holds
            watcher = Watcher(root, lambda: Index.open(root, settings=Settings.from_env())).start()
            time.sleep(QUIET_WINDOW)
            assert not watcher.live()  # still catching up: it may not claim a current index
        try:
            assert watcher.wait_ready(timeout=60)
            with Index.open(root, settings=Settings.from_env()) as reader:
                assert found(reader, "written_before_the_watch") == "src/late.py"
        finally:
            watcher.stop()


def test_git_is_asked_only_where_a_repository_can_be(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder with no `.git` in it or above runs no git process (two a refresh, 5 ms); a
    folder of a repository, however deep, still gets its branch and commit."""
    from codewhere import gitinfo

    monkeypatch.delenv("GIT_DIR", raising=False)
    if any((folder / ".git").exists() for folder in tmp_path.resolve().parents):
        pytest.skip("the temporary folder lies inside a git repository")
    plain = write_tree(tmp_path / "plain", {"a.py": "x = 1\n"})
    repo = write_tree(tmp_path / "repo", {"pkg/deep/a.py": "x = 1\n"})
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "one"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)
    runs: list[list[str]] = []
    real_run = subprocess.run

    def counted(command, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        runs.append(list(command))
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(gitinfo.subprocess, "run", counted)
    assert gitinfo.state(plain) is None and gitinfo.git_dir(plain) is None and runs == []
    found = gitinfo.state(repo / "pkg" / "deep")
    assert found is not None and found.branch == "main" and len(found.commit) == 40 and runs
