"""A hostile but realistic repository (unpacked from an archive, found on a shared volume): nothing
it brings runs, nothing outside it is read, and no entry of it hangs an index or a server. Every
test here failed on the code before its fix (issue 53)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from codewhere import confined, gitinfo
from codewhere.api import Index
from codewhere.config import Settings
from codewhere.errors import CodewhereError
from codewhere.scan import ScanOptions, read_source, scan
from codewhere.types import FileRecord, SkipReason
from tests.conftest import run_cli, write_tree

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


def hostile_git_repository(root: Path, marker: Path) -> Path:
    """A repository whose own configuration names programs git would run: an fsmonitor hook, a
    required clean filter and a process filter for every Python file, a post-index-change hook.
    Each program, if run, creates a file beside `marker`."""
    write_tree(root, {"app.py": "def serve(request):\n    return request\n", ".gitattributes": "*.py filter=evil\n"})
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "init")
    _git(root, "config", "core.fsmonitor", f"touch {marker}.fsmonitor; false")
    _git(root, "config", "filter.evil.clean", f"touch {marker}.clean; cat")
    _git(root, "config", "filter.evil.process", f"touch {marker}.process")
    _git(root, "config", "filter.evil.required", "true")
    hook = root / ".git" / "hooks" / "post-index-change"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch {marker}.hook\n")
    hook.chmod(0o755)
    return root


def _ran(marker: Path) -> list[str]:
    return sorted(p.name for p in marker.parent.glob(marker.name + ".*"))


@needs_git
def test_the_fixture_is_hostile_to_plain_git(tmp_path: Path) -> None:
    """The fixture holds what it says: plain `git status` runs its programs."""
    marker = tmp_path / "ran"
    root = hostile_git_repository(tmp_path / "repo", marker)
    (root / "app.py").touch()
    subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True, check=False)
    assert _ran(marker), "plain git ran none of the fixture's programs: the fixture proves nothing"


@needs_git
def test_a_repositorys_git_configuration_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    root = hostile_git_repository(tmp_path / "repo", marker)
    (root / "app.py").touch()  # a stale stat makes git read (and filter) the file
    state = gitinfo.state(root, dirty=True)
    assert state is not None and state.dirty is False and state.commit
    assert run_cli("index", str(root)).code == 0
    (root / "app.py").write_text("def serve(request):\n    return None\n")
    status = run_cli("status", str(root), "--json")
    assert status.code == 0, status.err
    assert status.json()["git"]["dirty"] is True  # still told, without the programs
    assert run_cli("search", "serve request", str(root)).code == 0
    assert _ran(marker) == []


# ---- no file outside the root is read -----------------------------------------------------------


def test_a_link_anywhere_in_the_path_is_refused_by_the_confined_reader(tmp_path: Path) -> None:
    outside = write_tree(tmp_path / "outside", {"secret.txt": "the password\n"})
    root = write_tree(tmp_path / "root", {"pkg/mod.py": "x = 1\n"})
    assert confined.read_bytes(root, "pkg/mod.py") == b"x = 1\n"
    (root / "pkg" / "mod.py").unlink()
    (root / "pkg" / "mod.py").symlink_to(outside / "secret.txt")
    with pytest.raises(confined.NotRegularFile):
        confined.read_bytes(root, "pkg/mod.py")
    shutil.rmtree(root / "pkg")
    (root / "pkg").symlink_to(outside)  # a folder on the way swapped for a link
    (outside / "mod.py").write_text("the password\n")
    with pytest.raises(confined.NotRegularFile):
        confined.read_bytes(root, "pkg/mod.py")
    with pytest.raises(confined.NotRegularFile):
        confined.read_bytes(root, "../outside/secret.txt")


def test_a_file_swapped_for_a_link_after_indexing_is_never_served(tmp_path: Path) -> None:
    outside = write_tree(tmp_path / "outside", {"secret.py": "PASSWORD = 'hunter2'\n"})
    root = write_tree(tmp_path / "root", {"app.py": "def serve():\n    return 1\n"})
    with Index.open(root, settings=Settings.from_env()) as index:
        index.refresh()
        assert "def serve" in index.read_file("app.py")[1]
        (root / "app.py").unlink()
        (root / "app.py").symlink_to(outside / "secret.py")
        with pytest.raises(CodewhereError) as refused:
            index.read_file("app.py")
        assert "hunter2" not in str(refused.value.message) + str(refused.value.hint)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "root", {"app.py": "def serve():\n    return 1\n"})
    os.mkfifo(root / "pipe.py")
    os.mkfifo(root / ".gitignore")  # read by the walk itself
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append((read_source(root, "pipe.py"),
                                                          [r for r in scan(root, ScanOptions(gitignore="always"))])),
                              daemon=True)
    worker.start()
    worker.join(10)
    assert done, "reading a named pipe blocked"
    source, found = done[0]  # type: ignore[misc]
    assert source is SkipReason.NOT_REGULAR
    assert [r.path for r in found if isinstance(r, FileRecord)] == ["app.py"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_file_swapped_for_a_named_pipe_does_not_wedge_the_index(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "root", {"app.py": "def serve():\n    return 1\n", "other.py": "def other():\n    pass\n"})
    with Index.open(root, settings=Settings.from_env()) as index:
        index.refresh()
        (root / "app.py").unlink()
        os.mkfifo(root / "app.py")
        started = time.monotonic()
        with pytest.raises(CodewhereError):
            index.read_file("app.py")
        index.refresh()
        assert time.monotonic() - started < 10
        assert [h.path for h in index.search("other", k=3)][:1] == ["other.py"]


# ---- a name that is not UTF-8, a link out of the tree, a crashed git ---------------------------


def test_a_file_name_that_is_not_utf8_is_skipped_and_the_rest_indexed(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "root", {"good.py": "def good_function():\n    return 2\n"})
    os.makedirs(os.fsencode(root) + b"/dir\xfe")
    for name in (b"/caf\xff.py", b"/dir\xfe/inner.py"):
        with open(os.fsencode(root) + name, "wb") as file:
            file.write(b"def latin():\n    return 1\n")
    indexed = run_cli("index", str(root), "--json")
    assert indexed.code == 0, indexed.err
    assert indexed.json()["skipped"].get("name-not-utf8") == 2
    found = run_cli("search", "good_function", str(root))
    assert found.code == 0 and "good.py:1-2" in found.out


def _served_answer_sees_an_edit(root: Path) -> None:
    """Through a served workspace with its watcher: a new file is found by the next answer."""
    from codewhere.workspace import Workspace

    workspace = Workspace([root])
    try:
        workspace.watch()
        index = workspace.open(workspace.roots[0])
        assert [h.path for h in index.search("good_function", k=1)] == ["good.py"]
        (root / "added.py").write_text("def added_after_the_start():\n    pass\n")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            index = workspace.open(workspace.roots[0])
            if any(h.path == "added.py" for h in index.search("added_after_the_start", k=3, mode="keyword")):
                return
            time.sleep(0.2)
        raise AssertionError(f"the new file was never found; watcher: {workspace.watch_state(workspace.roots[0])}")
    finally:
        workspace.close()


def test_a_served_tree_with_a_name_that_is_not_utf8_still_sees_edits(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "root", {"good.py": "def good_function():\n    return 2\n"})
    with open(os.fsencode(root) + b"/caf\xff.py", "wb") as file:
        file.write(b"x = 1\n")
    _served_answer_sees_an_edit(root)


def test_a_link_to_the_machines_root_does_not_silence_the_watch(tmp_path: Path) -> None:
    from codewhere.watch import link_leaving

    root = write_tree(tmp_path / "root", {"good.py": "def good_function():\n    return 2\n", "sub/x.py": "y = 2\n"})
    (root / "sub" / "inside").symlink_to(root / "good.py")
    (root / "sub" / "up").symlink_to(root)  # inside the tree: the scanner and the watcher see it as a loop
    assert link_leaving(root) is None
    (root / "sub" / "everything").symlink_to("/")
    assert link_leaving(root) == "sub/everything"
    _served_answer_sees_an_edit(root)


@needs_git
def test_a_stale_git_lock_holds_no_edit_back(tmp_path: Path) -> None:
    from codewhere.watch import GIT_LOCK_STALE_SECONDS, Watcher

    root = write_tree(tmp_path / "root", {"good.py": "def good_function():\n    return 2\n"})
    _git(root, "init", "-q")
    lock = root / ".git" / "index.lock"
    lock.write_text("")
    old = time.time() - GIT_LOCK_STALE_SECONDS - 5
    os.utime(lock, (old, old))  # left by a git that crashed a while ago
    watcher = Watcher(root, lambda: Index.open(root, settings=Settings.from_env())).start()
    try:
        assert watcher.wait_ready(timeout=60), watcher.status
        applied = watcher.status.applied
        (root / "edit.py").write_text("def edited():\n    pass\n")
        assert watcher.wait_applied(applied + 1, timeout=15), "an edit waited on a crashed git's lock"
        lock.touch()  # a git running now is still waited for
        (root / "edit2.py").write_text("def edited_again():\n    pass\n")
        assert not watcher.wait_applied(applied + 2, timeout=1.5)
    finally:
        watcher.stop()


def test_graph_answers_over_mcp_redact_a_signatures_secrets(tmp_path: Path) -> None:
    import json

    import anyio

    from tests.test_mcp import payload, session_run

    token = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
    root = write_tree(tmp_path / "repo", {"auth.py": f'def login(user, password="hunter2", api_token="{token}"):\n'
                                                     "    return check(user)\n\n\ndef check(user):\n    return user\n"})

    async def body(session) -> None:  # noqa: ANN001
        answers = [payload(await session.call_tool("outline", {"path": "auth.py"})),
                   payload(await session.call_tool("symbols", {"query": "login"})),
                   payload(await session.call_tool("graph", {"question": "callees", "name": "login"})),
                   payload(await session.call_tool("graph", {"question": "callers", "name": "check"})),
                   payload(await session.call_tool("graph", {"question": "impact", "name": "check"}))]
        shown = json.dumps(answers)
        assert "def login" in shown and token not in shown and "[REDACTED]" in shown

    anyio.run(session_run, root, body)


@pytest.mark.parametrize(("pattern", "ignored", "kept"), [
    ("*" * 200 + "z", ["az", "deep/dir/bz"], ["a.py"]),
    ("a/" + "*" * 50 + "/b.py", ["a/x/b.py", "a/x/y/b.py"], ["c/b.py"]),  # a run between slashes is git's `**`
    ("*?" * 20 + "q", [], ["a.py"]),  # more wildcards than a matcher can afford: skipped, said once
])
def test_an_ignore_line_that_would_backtrack_costs_nothing(tmp_path: Path, pattern: str, ignored: list[str], kept: list[str]) -> None:
    root = write_tree(tmp_path / "root", {**{p: "x = 1\n" for p in ignored + kept}, ".gitignore": pattern + "\n"})
    found: list[object] = []
    worker = threading.Thread(target=lambda: found.extend(scan(root, ScanOptions(gitignore="always"))), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the scan was still matching after 10 s"
    indexed = {r.path for r in found if isinstance(r, FileRecord)}
    assert indexed == set(kept) | {".gitignore"}


# ---- no single file stops an index ------------------------------------------------------------

NESTED = 30_000
HOSTILE_FILES: dict[str, str] = {  # built here, never committed as data
    "nested_functions.js": "".join(f"function f{i}() {{\n" for i in range(NESTED)) + "}\n" * NESTED,
    "unclosed_arrays.js": "x = " + "[\n" * 100_000,
    "unclosed_call.py": "x = (" + "(\n".join(f"a{i} + " for i in range(20_000)) + "\n",
    "nested_modules.rs": "".join(f"mod m{i} {{\n" for i in range(20_000)) + "}\n" * 20_000,
    "nested_blocks.c": "int main() {\n" + "{\n" * 50_000 + "}\n" * 50_000 + "}\n",
    "indented.py": "".join("    " * i + f"def f{i}():\n" for i in range(600)) + "    " * 600 + "pass\n",
    # found by the fuzz pass (tests/test_properties.py): a bash grammar quadratic in its error
    # recovery, a comment opener repeated on one line, indentation the import pattern backtracked on
    "defs.sh": "".join(f"def f{i}(a):\n" for i in range(12_000)),
    "comments.cpp": "/* " * 7_000 + "end\n" * 7_000,
    "indented.java": "".join("    " * min(i, 200) + f"func f{i}() {{\n" for i in range(9_900)) + ")\n" * 9_900,
}


def _run_bounded(*args: str) -> tuple[int, float, int]:
    """(exit code, seconds, peak memory in MB) of one CLI run. The peak is the process's own
    VmHWM, read as it ends: a forked child's rusage counts the parent's pages it shared before
    its exec (pytest's, 784 MB late in a full run)."""
    import sys
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".hwm") as peak:
        program = ("import sys; from codewhere.cli import main; code = main(sys.argv[2:]); "
                   "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]; "
                   "open(sys.argv[1], 'w').write(hwm); sys.exit(code)")
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", program, peak.name, *args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=dict(os.environ), timeout=120, check=False)
        seconds = time.monotonic() - started
        return done.returncode, seconds, int(peak.read() or 0) // 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak memory from /proc")
@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
def test_no_single_file_costs_more_than_5_s_or_300_mb(tmp_path: Path, name: str) -> None:
    root = write_tree(tmp_path / "root", {name: HOSTILE_FILES[name], "good.py": "def good_function():\n    return 2\n"})
    code, seconds, megabytes = _run_bounded("index", str(root))
    assert code == 0 and seconds < 5 and megabytes < 300, (code, seconds, megabytes)
    found = run_cli("search", "good_function", str(root))
    assert found.code == 0 and found.out.startswith("good.py:1-2")


def test_a_server_answers_over_a_tree_of_every_hostile_file(tmp_path: Path) -> None:
    import anyio

    from tests.test_mcp import payload, session_run

    root = write_tree(tmp_path / "root", {**HOSTILE_FILES, "good.py": "def good_function():\n    return 2\n"})
    os.mkfifo(root / "pipe.py")
    with open(os.fsencode(root) + b"/caf\xff.py", "wb") as file:
        file.write(b"x = 1\n")
    (root / "everything").symlink_to("/")
    (root / ".gitignore").write_text("*" * 200 + "z\n")

    async def body(session) -> None:  # noqa: ANN001
        started = time.monotonic()
        first = payload(await session.call_tool("search", {"query": "good_function"}))
        assert first["hits"][0]["location"].startswith("good.py:1-2")
        assert time.monotonic() - started < 30  # the first call indexes the whole tree
        started = time.monotonic()
        again = payload(await session.call_tool("search", {"query": "good_function"}))
        assert again["hits"][0]["location"].startswith("good.py:1-2") and time.monotonic() - started < 1.0
        status = payload(await session.call_tool("index_status", {}))
        assert status["files"] >= 2

    anyio.run(session_run, root, body)


def test_a_parse_budget_running_out_while_symbols_are_read_does_not_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget stops tree-sitter's parse by answering its reads with nothing; a node's text is
    read through the same callback, and when the budget ran out after the parse (a big file on a
    loaded machine), tree-sitter asked for that text again forever: an indexer of 1,000
    repositories hung on a 529 KB test file. Past the parse the text is always served."""
    from codewhere.parse import parser

    ceiling = {"rss": 0}
    monkeypatch.setattr(parser, "_resident_memory", lambda: ceiling["rss"])
    read_symbols = parser._symbols  # noqa: SLF001

    def symbols_once_over_budget(defs, language):  # noqa: ANN001, ANN202
        ceiling["rss"] = 1 << 50  # from here on every budget check fails
        return read_symbols(defs, language)

    monkeypatch.setattr(parser, "_symbols", symbols_once_over_budget)
    source = "".join(f"@decorate({n})\ndef handler_{n}(request):\n    return {n}\n\n" for n in range(200))
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(parser.parse("python", source)), daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "reading the symbols' text hung once the budget ran out"
    parsed = result[0]
    assert parsed is not None and [s.decorators for s in parsed.symbols][:2] == [("@decorate(0)",), ("@decorate(1)",)]
