from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from codewhere.config import Settings
from codewhere.locks import index_writer_lock
from codewhere.search.params import DEFAULT_PARAMS
from codewhere.store.sqlite import SCHEMA_VERSION
from tests.conftest import CliResult, write_tree


def assert_one_line_error(result, *words: str) -> None:
    assert result.code == 2, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("codewhere: ") and " — " in lines[0], lines[0]
    assert "Traceback" not in result.err
    for word in words:
        assert word in lines[0]


def test_search_prints_grep_like_lines_and_exit_0(sample_repo: Path, cli) -> None:
    result = cli("search", "charge_credit_card", str(sample_repo), "-k", "2")
    assert result.code == 0, result.err
    first = result.out.splitlines()[0]
    assert first.startswith("src/shop/payment.py:2-6 ")  # the function's own lines
    assert first.rstrip().endswith("code  charge_credit_card")  # its kind, then the definition it is
    assert "def charge_credit_card(card, amount):" in result.out
    assert "\x1b[" not in result.out  # no colour when stdout is not a terminal


def test_search_json_schema(sample_repo: Path, cli) -> None:
    result = cli("search", "getUserById", str(sample_repo), "--json")
    assert result.code == 0
    payload = result.json()
    assert payload["query"] == "getUserById"
    assert payload["root"] == str(sample_repo.resolve())
    hit = payload["hits"][0]
    assert set(hit) == {"location", "path", "start_line", "end_line", "symbol", "score", "kind", "language", "snippet",
                        "snippet_line", "why"}
    assert hit["symbol"] == "getUserById"
    assert hit["start_line"] <= hit["snippet_line"] <= hit["end_line"]
    assert (hit["path"], hit["start_line"], hit["kind"], hit["language"]) == ("src/web/handlers.ts", 2, "code", "typescript")
    assert hit["location"] == f"src/web/handlers.ts:2-{hit['end_line']}"
    assert hit["why"]["names"] == 1 and hit["why"]["definition"] == 1 + DEFAULT_PARAMS.definition_boost
    assert "getUserById" in hit["snippet"]


def test_no_hit_exits_1(sample_repo: Path, cli) -> None:
    result = cli("search", "zzqqxxnothing", str(sample_repo), "--json", "--mode", "keyword")
    assert result.code == 1
    assert result.json()["hits"] == []
    # vectors always have nearest neighbours, so hybrid finds nothing only where nothing is in
    # scope: a scope that matches no file is a mistake, and says so
    assert_one_line_error(cli("search", "cart", str(sample_repo), "--scope", "no/such/dir"), "matches no indexed file")


def test_search_defaults_to_the_current_folder_and_refreshes_it(sample_repo: Path, cli) -> None:
    assert cli("search", "RateLimiter", cwd=sample_repo).code == 0
    (sample_repo / "src/new_module.py").write_text("def freshly_added_function():\n    pass\n")
    result = cli("search", "freshly_added_function", "--json", cwd=sample_repo)
    assert result.code == 0 and result.json()["hits"][0]["path"] == "src/new_module.py"


def test_index_summary_and_status(sample_repo: Path, cli) -> None:
    (sample_repo / "yarn.lock").write_text("x")
    (sample_repo / "blob.bin").write_bytes(b"\0\0\0")
    result = cli("index", str(sample_repo), "--json")
    assert result.code == 0, result.err
    summary = result.json()
    assert summary["files_kept"] == 8
    assert summary["skipped"] == {"asset": 1, "lockfile": 1}
    status = cli("status", str(sample_repo), "--json").json()
    assert summary["chunks"] == status["chunks"] > 8
    text = cli("index", str(sample_repo))
    assert "files: 8 kept" in text.out and "skipped: 2 (asset 1, lockfile 1)" in text.out
    assert status["files"] == 8 and status["meta"]["schema_version"] == SCHEMA_VERSION


def test_nothing_is_written_inside_the_indexed_folder(sample_repo: Path, cli, isolated_cache: Path) -> None:
    before = sorted(p.relative_to(sample_repo) for p in sample_repo.rglob("*"))
    assert cli("search", "cart", str(sample_repo)).code == 0
    assert sorted(p.relative_to(sample_repo) for p in sample_repo.rglob("*")) == before
    assert list((isolated_cache / "indexes").glob("repo-*.sqlite"))


def test_index_option_chooses_the_file(sample_repo: Path, cli, tmp_path: Path) -> None:
    target = tmp_path / "custom" / "my.sqlite"
    assert cli("index", str(sample_repo), "--index", str(target)).code == 0
    assert target.exists()
    assert cli("search", "Cart", str(sample_repo), "--index", str(target)).code == 0


# ---- bad input: one line, names the fix, exit 2 ----------------------------------------------


def test_missing_path(cli, tmp_path: Path) -> None:
    assert_one_line_error(cli("search", "x", str(tmp_path / "nope")), "does not exist")


def test_file_instead_of_folder(sample_repo: Path, cli) -> None:
    assert_one_line_error(cli("index", str(sample_repo / "README.md")), "is a file")


def test_empty_folder(tmp_path: Path, cli) -> None:
    (tmp_path / "empty").mkdir()
    assert_one_line_error(cli("search", "x", str(tmp_path / "empty")), "nothing to index", "empty")


def test_folder_with_nothing_indexable(tmp_path: Path, cli) -> None:
    write_tree(tmp_path, {"a.png": b"\x89PNG\0", "node_modules/x.js": "x", "data.dat": b"\0\0"})
    assert_one_line_error(cli("index", str(tmp_path)), "nothing to index", "1 binary", ".gitignore")


def test_empty_query_and_bad_k(sample_repo: Path, cli) -> None:
    assert_one_line_error(cli("search", "   ", str(sample_repo)), "empty")
    assert_one_line_error(cli("search", "cart", str(sample_repo), "-k", "0"), "-k")


def test_invalid_utf8_huge_line_and_nul_files_are_indexed_or_skipped_quietly(tmp_path: Path, cli) -> None:
    write_tree(tmp_path, {
        "latin1.py": b"def caf\xe9_menu():\n    return 'cr\xe8me'\n",
        "minified.js": "var a=1;" * 25_000 + "function minifiedNeedle(){}",
        "nul.py": b"\0binary",
        "ok.py": "def ordinary():\n    pass\n",
    })
    result = cli("index", str(tmp_path), "--json")
    assert result.code == 0, result.err
    summary = result.json()
    assert summary["files_kept"] == 2 and summary["skipped"] == {"binary": 1, "minified": 1}
    assert cli("search", "minifiedNeedle", str(tmp_path), "--mode", "keyword").code == 1
    summary = cli("index", str(tmp_path), "--json", "--include-minified").json()
    assert summary["files_kept"] == 3 and summary["skipped"] == {"binary": 1}
    hit = cli("search", "minifiedNeedle", str(tmp_path), "--json", "--include-minified").json()["hits"][0]
    assert (hit["path"], hit["start_line"], hit["end_line"]) == ("minified.js", 1, 1)
    assert len(hit["snippet"]) < 400
    assert cli("search", "menu", str(tmp_path), "--json").json()["hits"][0]["path"] == "latin1.py"


def test_symlink_loop_does_not_hang(tmp_path: Path, cli) -> None:
    write_tree(tmp_path, {"a/code.py": "def looped(): pass\n"})
    os.symlink(tmp_path / "a", tmp_path / "a" / "again")
    result = cli("index", str(tmp_path), "--json", timeout=30)
    assert result.code == 0 and result.json()["skipped"] == {"symlink-loop": 1}


def test_corrupt_index_file(sample_repo: Path, cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database at all" * 100)
    assert_one_line_error(cli("search", "cart", str(sample_repo), "--index", str(bad)), "not a SQLite database", "--rebuild")
    assert cli("index", str(sample_repo), "--index", str(bad), "--rebuild").code == 2  # not ours: left alone
    assert bad.read_bytes().startswith(b"this is not")


def test_corrupt_index_in_the_cache_is_rebuilt_on_request(sample_repo: Path, cli) -> None:
    path = Settings.from_env().index_path_for(sample_repo.resolve())
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage" * 1000)
    assert_one_line_error(cli("search", "cart", str(sample_repo)), "--rebuild")
    assert cli("index", str(sample_repo), "--rebuild").code == 0
    assert cli("search", "Cart", str(sample_repo)).code == 0


def test_foreign_sqlite_file_is_refused_and_untouched(sample_repo: Path, cli, tmp_path: Path) -> None:
    foreign = tmp_path / "app.db"
    db = apsw.Connection(str(foreign))
    db.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users(name) VALUES('ada')")
    db.close()
    assert_one_line_error(cli("index", str(sample_repo), "--index", str(foreign)), "not a codewhere index")
    assert_one_line_error(cli("index", str(sample_repo), "--index", str(foreign), "--rebuild"), "not a codewhere index")
    db = apsw.Connection(str(foreign))
    assert db.execute("SELECT name FROM users").fetchall() == [("ada",)]


def test_second_indexer_fails_cleanly_and_search_still_answers(sample_repo: Path, cli) -> None:
    assert cli("index", str(sample_repo)).code == 0
    path = Settings.from_env().index_path_for(sample_repo.resolve())
    with index_writer_lock(path, 0):
        assert_one_line_error(cli("index", str(sample_repo), "--wait", "0.2"), "another codewhere process", "--wait")
        result = cli("search", "Cart", str(sample_repo), "--json")
        assert result.code == 0 and result.json()["hits"]
        assert "searching the index as it stands" in result.err


def test_killed_indexer_leaves_a_readable_index(tmp_path: Path, cli) -> None:
    files = {f"pkg{i % 50}/module_{i}.py": f"def handler_number_{i}(x):\n    return x + {i}\n" * 40 for i in range(4000)}
    write_tree(tmp_path / "big", files)
    index_file = tmp_path / "idx.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "codewhere", "index", str(tmp_path / "big"), "--index", str(index_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not index_file.exists():
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    db = apsw.Connection(str(index_file))
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    # every stored file has all of its chunks, and the next run completes the index
    result = cli("index", str(tmp_path / "big"), "--index", str(index_file), "--json")
    assert result.code == 0, result.err
    summary = result.json()
    assert summary["files_kept"] == 4000
    assert summary["files_added"] + summary["files_unchanged"] == 4000
    status = cli("status", str(tmp_path / "big"), "--index", str(index_file), "--json").json()
    assert status["files"] == 4000


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "codewhere"
    assert script.exists()
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("codewhere ")


def test_a_closed_pipe_ends_search_quietly_as_a_success(sample_repo: Path, cli) -> None:
    """`codewhere search ... | head -1`: the reader has gone before the hits are written."""
    assert cli("index", str(sample_repo)).code == 0
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write now fails with EPIPE, whatever the timing
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "codewhere", "search", "Cart", str(sample_repo), "--mode", "keyword"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_cache_inside_the_searched_folder(tmp_path: Path, cli, monkeypatch) -> None:
    home = write_tree(tmp_path / "home", {"project/app.py": "def home_function():\n    pass\n"})
    monkeypatch.setenv("CODEWHERE_CACHE_DIR", str(home / ".cache" / "codewhere"))
    result = cli("search", "home_function", str(home), "--mode", "keyword", "--json")
    assert result.code == 0 and result.json()["hits"][0]["path"] == "project/app.py"
    monkeypatch.setenv("CODEWHERE_CACHE_DIR", str(home / "project" / "idx"))
    assert_one_line_error(cli("search", "x", str(home)), "cache dir", "CODEWHERE_CACHE_DIR")


def test_a_search_of_an_unchanged_index_imports_neither_ignore_matching_nor_evaluation(sample_repo: Path, cli) -> None:
    assert cli("index", str(sample_repo)).code == 0
    (sample_repo / ".gitignore").write_text("build/\n")  # rules a walk would read: a quick check reads none
    assert cli("index", str(sample_repo)).code == 0
    code = (
        "import sys\nfrom codewhere.cli import main\n"
        f"sys.argv = ['codewhere', 'search', 'charge credit card', {str(sample_repo)!r}, '-k', '3']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "loaded = [m for m in ('pathspec', 'codewhere.evaluate', 'codewhere.eval_report', 'codewhere.defs') if m in sys.modules]\n"
        "print('loaded:', ','.join(loaded) or 'none', file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert "loaded: none" in result.stderr, result.stderr
    assert "cart.py" in result.stdout


def test_index_json_gives_each_phase_its_seconds_in_order(sample_repo: Path, cli) -> None:
    first = cli("index", str(sample_repo), "--json")
    assert first.code == 0, first.err
    report = first.json()
    assert list(report["phases"]) == ["scan", "files", "edges", "vectors"]
    assert all(seconds >= 0 for seconds in report["phases"].values())
    assert abs(sum(report["phases"].values()) - report["seconds"]) < 0.01  # the phases tile the run
    again = cli("index", str(sample_repo), "--json").json()
    assert list(again["phases"]) == ["scan"]  # nothing read, resolved or embedded


def test_a_hit_line_is_never_wrapped_into_a_pipe(tmp_path: Path, cli) -> None:
    """Issue 52: off a terminal a long header folded at 80 columns put the symbol on a line of its own."""
    name = "a_rather_long_function_name_that_pushes_the_header_past_eighty_columns"
    root = write_tree(tmp_path / "repo", {f"src/some/deeply/nested/package/{name}_module.py": f"def {name}(x):\n    return x\n"})
    result = cli("search", name, str(root), "-k", "1")
    header = result.out.splitlines()[0]
    assert len(header) > 80 and header.endswith(name) and ":1-2" in header


def test_a_first_index_of_home_or_a_system_folder_unasked_is_refused(tmp_path: Path) -> None:
    """Issue 52: `codewhere search` run from /usr started indexing 65,554 files."""
    home = write_tree(tmp_path / "home", {"notes.py": "def note():\n    pass\n"})
    env = {**os.environ, "HOME": str(home), "CODEWHERE_CACHE_DIR": str(tmp_path / "cache")}
    for cwd in (home, Path("/usr")):
        refused = subprocess.run([sys.executable, "-m", "codewhere", "search", "note"], cwd=cwd, env=env,
                                 capture_output=True, text=True, timeout=60)
        assert_one_line_error(CliResult(refused.returncode, refused.stdout, refused.stderr), "not indexing", "no PATH named it")
    assert not (tmp_path / "cache" / "indexes").exists() or not any((tmp_path / "cache" / "indexes").iterdir())
    named = subprocess.run([sys.executable, "-m", "codewhere", "search", "note", str(home)], env=env,
                           capture_output=True, text=True, timeout=60)
    assert named.returncode == 0 and "notes.py:1-2" in named.stdout


def test_a_big_folder_outside_git_is_refused_off_a_terminal(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from codewhere import guard
    from codewhere.errors import QueryError
    from codewhere.scan import ScanOptions

    big = tmp_path / "big"
    for i in range(guard.GUARD_FILES + 1):
        path = big / f"d{i // 1000}" / f"f{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    refused = cli("index", str(big))
    assert_one_line_error(refused, "not a git repository", "--yes", "confirm_large")
    # asked on a terminal: yes proceeds, no refuses; a repository is never asked about
    monkeypatch.setattr(guard, "GUARD_FILES", 100)
    asked: list[str] = []
    guard.check_first_index(big, True, tmp_path / "cache", ScanOptions(), lambda q: asked.append(q) or True)
    assert asked and "index it all?" in asked[0]
    with pytest.raises(QueryError):
        guard.check_first_index(big, True, tmp_path / "cache", ScanOptions(), lambda q: False)
    (big / ".git").mkdir()
    guard.check_first_index(big, True, tmp_path / "cache", ScanOptions(), None)


def test_status_is_a_few_lines_whatever_the_tree_holds(tmp_path: Path, cli) -> None:
    """Issue 51: Django's status was 190,000 characters, nearly all the folders' freshness stamps."""
    root = write_tree(tmp_path / "repo", {f"pkg{i}/sub{j}/mod.py": f"def f_{i}_{j}():\n    pass\n" for i in range(30) for j in range(10)})
    assert cli("index", str(root)).code == 0
    text = cli("status", str(root))
    assert text.code == 0 and len(text.out.splitlines()) <= 8 and "tree_stamps" not in text.out
    data = cli("status", str(root), "--json")
    assert "tree_stamps" not in data.out and len(data.out) < 1_500  # about 300 tokens
    assert data.json()["files"] == 300 and data.json()["model"] == "default"


def test_ripgreps_habits_glob_type_files_context_and_usage(sample_repo: Path, cli) -> None:
    """Issue 52: -C, -l, -g, -t were unrecognized arguments, and the usage shown was the top level's."""
    only_tests = cli("search", "charge credit card", str(sample_repo), "-g", "tests/**", "--json").json()
    assert only_tests["hits"] and {h["path"] for h in only_tests["hits"]} == {"tests/test_payment.py"}
    no_tests = cli("search", "charge credit card", str(sample_repo), "-g", "!tests/", "--json").json()
    assert no_tests["hits"] and all(not h["path"].startswith("tests/") for h in no_tests["hits"])
    typed = cli("search", "request", str(sample_repo), "-t", "ts", "--json").json()
    assert typed["hits"] and {h["language"] for h in typed["hits"]} == {"typescript"}
    paths = cli("search", "charge credit card", str(sample_repo), "-l").out.splitlines()
    assert paths and len(paths) == len(set(paths)) and all(":" not in p for p in paths)
    listed = cli("search", "charge credit card", str(sample_repo), "-l", "--json").json()
    assert listed["paths"] == paths  # --json carries -l's paths beside the hits
    one = cli("search", "charge_credit_card", str(sample_repo), "-k", "1", "--json").json()["hits"][0]
    wide = cli("search", "charge_credit_card", str(sample_repo), "-k", "1", "-C", "3", "--json").json()["hits"][0]
    assert wide["snippet_line"] == max(1, one["snippet_line"] - 3)
    assert len(wide["snippet"].split("\n")) > len(one["snippet"].split("\n"))
    capped = cli("search", "charge_credit_card", str(sample_repo), "-k", "1", "-C", "3", "--max-lines", "2")
    assert len(capped.out.splitlines()) == 3  # the header and two lines
    unknown = cli("search", "x", str(sample_repo), "--bogus")
    assert unknown.code == 2 and unknown.err.startswith("usage: codewhere search") and "--bogus" in unknown.err
    bad_type = cli("search", "x", str(sample_repo), "-t", "cobol")
    assert_one_line_error(bad_type, "unknown type")
