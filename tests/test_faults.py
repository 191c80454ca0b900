"""The faults a real user hits: each one loses nothing and hangs nothing (issue: nothing lost,
nothing wedged). Every test here failed on the code before its fix."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codewhere.api import Index
from codewhere.config import Settings
from codewhere.embed.fake import FakeEmbedder
from tests.conftest import SAMPLE_REPO, make_tiny_model2vec, run_cli, write_tree


def many_files(root: Path, count: int) -> Path:
    """A tree big enough that indexing it takes a few seconds."""
    for i in range(count):
        body = "\n".join(
            f"def handler_{i}_{j}(request, retries={j}):\n    \"\"\"Serve request {j} of module {i}.\"\"\"\n"
            f"    return request.send(retries + {j})\n" for j in range(12)
        )
        path = root / f"pkg{i % 20}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body + "\n", encoding="utf-8")
    return root


def wait_for(condition, timeout: float = 60.0, what: str = "the condition") -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "codewhere", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def index_file(root: Path) -> Path:
    return Settings.from_env().index_path_for(root.resolve())


# ---- 1. a second rebuild never destroys the live index ----------------------------------------


@pytest.fixture
def big_indexed(tmp_path: Path) -> tuple[Path, Path]:
    root = many_files(tmp_path / "big", 1500)
    model = make_tiny_model2vec(tmp_path / "tiny")
    assert run_cli("index", str(root), "--model", str(model)).code == 0
    return root, model


def test_second_rebuild_is_refused_and_the_live_index_keeps_answering(big_indexed: tuple[Path, Path]) -> None:
    root, model = big_indexed
    first = start_cli("index", str(root), "--rebuild", "--model", str(model))
    beside = Path(f"{index_file(root)}.rebuild")
    wait_for(beside.exists, what="the first rebuild to start")
    second = run_cli("index", str(root), "--rebuild", "--model", str(model), "--wait", "0.2")
    assert second.code == 2 and "another codewhere process holds" in second.err
    during = run_cli("status", str(root), "--json")
    assert during.code == 0 and during.json()["files"] == 1500  # the old index, whole
    hit = run_cli("search", "handler_7_3", str(root), "--mode", "keyword", "-k", "1", "--json")
    assert hit.code == 0 and hit.json()["hits"][0]["path"] == "pkg7/mod7.py"
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert not beside.exists()
    after = run_cli("status", str(root), "--json").json()
    assert after["files"] == 1500 and after["chunks"] == 1500 * 12


def test_a_killed_rebuild_leaves_the_old_index(big_indexed: tuple[Path, Path]) -> None:
    root, model = big_indexed
    before = run_cli("status", str(root), "--json").json()
    first = start_cli("index", str(root), "--rebuild", "--model", str(model))
    wait_for(Path(f"{index_file(root)}.rebuild").exists, what="the rebuild to start")
    time.sleep(0.5)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    after = run_cli("status", str(root), "--json").json()
    assert (after["files"], after["chunks"]) == (before["files"], before["chunks"])
    assert run_cli("index", str(root), "--model", str(model)).code == 0  # a plain index clears what it left
    assert [p.name for p in index_file(root).parent.iterdir() if ".rebuild" in p.name] == []
    again = run_cli("index", str(root), "--rebuild", "--model", str(model), "--json")
    assert again.code == 0 and again.json()["files_added"] == 1500


class BrokenEmbedder(FakeEmbedder):
    def embed_documents(self, texts):  # noqa: ANN001, ANN201
        raise RuntimeError("embedding failed")


def test_a_failed_rebuild_leaves_readers_the_old_index(sample_repo: Path) -> None:
    with Index.open(sample_repo, embedder=FakeEmbedder()) as index:
        index.refresh()
    write_tree(sample_repo, {"src/extra.py": "def extra_feature():\n    return 1\n"})
    with Index.open(sample_repo, embedder=BrokenEmbedder()) as writer, \
            Index.open(sample_repo, embedder=FakeEmbedder()) as reader:
        with pytest.raises(RuntimeError, match="embedding failed"):
            writer.refresh(rebuild=True)
        assert reader.status().files == len(SAMPLE_REPO)
        assert reader.search("charge_credit_card", k=1)[0].path == "src/shop/payment.py"
    assert not Path(f"{index_file(sample_repo)}.rebuild").exists()
    with Index.open(sample_repo, embedder=FakeEmbedder()) as index:
        assert index.refresh(rebuild=True).files_added == len(SAMPLE_REPO) + 1
        assert index.search("extra_feature", k=1)[0].path == "src/extra.py"


def test_rebuild_with_another_model_swaps_in_that_model(sample_repo: Path) -> None:
    with Index.open(sample_repo, embedder=FakeEmbedder(dim=32, name="one")) as index:
        index.refresh()
    with Index.open(sample_repo, embedder=FakeEmbedder(dim=48, name="two")) as index:
        index.refresh(rebuild=True)
        assert index.store.model().id == "two" and index.store.model().dim == 48
        assert index.search("refund the payment", k=1)


# ---- 2. one long line costs linear space --------------------------------------------------------


def minified_bundle(functions: int) -> str:
    return "".join(f"function f{i}(a,b){{var c=a+b*{i};return c>{i}?g{i}(c):a}}" for i in range(functions))


def stored_text_bytes(index: Index) -> int:
    db = index.store._db  # noqa: SLF001 — what the file holds is the point of this test
    return int(db.execute("SELECT coalesce(sum(length(text)) + sum(length(embed_text)), 0) FROM chunks").fetchone()[0])


def test_a_200_kb_minified_line_is_stored_in_linear_space(tmp_path: Path) -> None:
    bundle = minified_bundle(3450)  # 200 KB, 3,450 functions on one line
    assert len(bundle) > 200_000
    root = write_tree(tmp_path / "site", {"app.js": bundle, "small.js": minified_bundle(850)})
    with Index.open(root, embedder=FakeEmbedder(), include_minified=True) as index:
        index.refresh()
        total = stored_text_bytes(index)
        assert total <= 6 * (len(bundle) + 850 * 60)  # text and embedding text, each at most twice
        assert index.status().chunks < 400
        assert index.search("f1234", k=1, mode="keyword")[0].path == "app.js"
    assert index_file(root).stat().st_size < 30 * len(bundle)


def test_minified_files_are_skipped_by_default_and_counted(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "site", {"app.js": minified_bundle(3400), "vendor.min.js": "var a;",
                                          "main.js": "function main() {\n  return 1;\n}\n"})
    with Index.open(root, embedder=FakeEmbedder()) as index:
        report = index.refresh()
        assert report.skipped == {"minified": 2} and report.files_kept == 1


# ---- 3. no MCP call wedges the server ---------------------------------------------------------


def call_graph_tree(root: Path) -> Path:
    """A 300-function call cycle and 2,500 callers of one hub, in files of 100 functions."""
    files: dict[str, str | bytes] = {}
    for part in range(3):
        files[f"cycle/c{part}.py"] = "\n".join(
            f"def step_{i}():\n    return step_{(i + 1) % 300}()\n" for i in range(part * 100, part * 100 + 100))
    files["hub.py"] = "def hub():\n    return 1\n"
    for part in range(25):
        files[f"wide/w{part}.py"] = "\n".join(
            f"def caller_{i}():\n    return hub()\n" for i in range(part * 100, part * 100 + 100))
    return write_tree(root, files)


def test_impact_with_a_huge_depth_ends_and_says_where_it_was_cut(tmp_path: Path) -> None:
    root = call_graph_tree(tmp_path / "graph")
    with Index.open(root, embedder=FakeEmbedder()) as index:
        index.refresh(vectors=False)
        started = time.perf_counter()
        _, cycle = index.impact("step_0", depth=1_000_000)
        assert time.perf_counter() - started < 5
        assert len(cycle.items) == 50 and cycle.cut == "depth capped at 50"
        _, small = index.impact("step_0", depth=3)
        assert [i.symbol.name for i in small.items] == ["step_299", "step_298", "step_297"] and small.cut == ""
        _, wide = index.impact("hub", depth=3)
        assert len(wide.items) == 2_000 and "stopped at 2000 symbols" in wide.cut
    result = run_cli("impact", "step_0", str(root), "--depth", "100000", "--json", timeout=60)
    assert result.code == 0 and result.json()["cut"] == "depth capped at 50"


def test_mcp_calls_at_once_all_answer_and_errors_carry_their_reason(tmp_path: Path) -> None:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    root = call_graph_tree(tmp_path / "graph")
    params = StdioServerParameters(command=sys.executable, args=["-m", "codewhere", "mcp", str(root)], env=dict(os.environ))

    async def main() -> None:
        async with stdio_client(params) as streams, ClientSession(*streams) as session:
            await session.initialize()
            results: list[object] = []

            async def one(tool: str, args: dict[str, object]) -> None:
                results.append(await session.call_tool(tool, args))

            with anyio.fail_after(240):
                async with anyio.create_task_group() as group:
                    for _ in range(3):
                        group.start_soon(one, "graph", {"question": "impact", "name": "step_0", "depth": 1_000_000})
                        group.start_soon(one, "search", {"query": "hub"})
                        group.start_soon(one, "outline", {"path": "hub.py"})
                        group.start_soon(one, "graph", {"question": "callers", "name": "hub"})
            assert len(results) == 12 and not any(r.is_error for r in results), [r.content for r in results if r.is_error]
            fuzzy = await session.call_tool("search", {"query": "hub", "mode": "fuzzy"})
            assert fuzzy.is_error and "unknown mode 'fuzzy'" in fuzzy.content[0].text and "hybrid" in fuzzy.content[0].text
            nul = await session.call_tool("outline", {"path": "hub\0.py"})
            assert nul.is_error and "NUL byte" in nul.content[0].text
            nul_query = await session.call_tool("search", {"query": "hub\0"})
            assert nul_query.is_error and "NUL byte" in nul_query.content[0].text
            callers = await session.call_tool("graph", {"question": "callers", "name": "hub"})
            # the closest first, within the token budget, and how to get the rest
            assert not callers.is_error and "of 2500; pass offset=" in callers.content[0].text
            assert len(callers.content[0].text) <= 4 * 4_000
            first = json.loads(callers.content[0].text)
            offset = int(first["cut"].rsplit("offset=", 1)[1].split()[0])
            second = json.loads((await session.call_tool("graph", {"question": "callers", "name": "hub", "offset": offset})).content[0].text)
            assert second["cut"].startswith(f"showing {offset + 1}-") and second["references"][0] not in first["references"]
            after = await session.call_tool("search", {"query": "step_7"})
            assert not after.is_error

    anyio.run(main)


# ---- 4. an index that cannot be written still answers ------------------------------------------


@pytest.fixture
def immutable():  # noqa: ANN201
    """chattr +i on paths (root ignores chmod), undone after the test."""
    made: list[Path] = []

    def make(path: Path) -> None:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not supported on this file system")
        made.append(path)

    yield make
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


@pytest.mark.parametrize("what", ["file", "shm", "folder"])
def test_search_answers_from_an_index_it_cannot_write(sample_repo: Path, cli, immutable, what: str) -> None:  # noqa: ANN001
    assert cli("index", str(sample_repo)).code == 0
    path = index_file(sample_repo)
    assert cli("search", "charge_credit_card", str(sample_repo), "-k", "1").code == 0  # leaves -shm beside it
    (sample_repo / "src/shop/new.py").write_text("def brand_new():\n    return 1\n")
    target = {"file": path, "shm": Path(f"{path}-shm"), "folder": path.parent}[what]
    if what == "shm" and not target.exists():
        target.write_bytes(b"")
    immutable(target)
    result = cli("search", "charge_credit_card", str(sample_repo), "-k", "1", "--json")
    assert result.code == 0, result.err
    assert result.json()["hits"][0]["path"] == "src/shop/payment.py"
    assert "internal error" not in result.err and "Traceback" not in result.err
    # either the index took the new file, or search said once why it could not: never silently stale
    fresh = cli("search", "brand_new", str(sample_repo), "--mode", "keyword", "-k", "1", "--json")
    refreshed = fresh.code == 0 and fresh.json()["hits"][0]["path"] == "src/shop/new.py"
    warned = result.err.count("could not refresh") == 1 and "chattr -i" in result.err
    assert refreshed != warned, (what, result.err)
    if what == "file":  # an immutable index file can never take the write
        assert warned


@pytest.fixture
def small_disk(tmp_path: Path, request: pytest.FixtureRequest):  # noqa: ANN201
    mount = tmp_path / "disk"
    mount.mkdir()
    size = getattr(request, "param", "600k")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_while_indexing_is_one_line_and_keeps_the_last_index(tmp_path: Path, small_disk: Path) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    model = make_tiny_model2vec(tmp_path / "tiny")
    index = small_disk / "repo.sqlite"
    first = run_cli("index", str(root), "--index", str(index), "--model", str(model), "--json")
    assert first.code == 0, first.err
    many_files(root / "more", 400)
    full = run_cli("index", str(root), "--index", str(index), "--model", str(model))
    assert full.code == 2 and full.err.count("\n") == 1, full.err
    assert "disk is full" in full.err and "free some space" in full.err
    status = run_cli("status", str(root), "--index", str(index), "--json")
    assert status.code == 0 and status.json()["files"] == len(SAMPLE_REPO)
    hit = run_cli("search", "charge_credit_card", str(root), "--index", str(index), "--model", str(model), "--json")
    assert hit.code == 0 and hit.json()["hits"][0]["path"] == "src/shop/payment.py"


@pytest.mark.parametrize("small_disk", ["4m"], indirect=True)  # room for the WAL to be folded in first
def test_a_disk_full_before_the_search_still_answers(tmp_path: Path, small_disk: Path) -> None:
    import apsw

    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    index = small_disk / "repo.sqlite"
    model = make_tiny_model2vec(tmp_path / "tiny")
    assert run_cli("index", str(root), "--index", str(index), "--model", str(model)).code == 0
    db = apsw.Connection(str(index))  # the last connection's close folds the WAL in and removes it
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    assert not Path(f"{index}-wal").exists()
    filler = small_disk / "filler"
    with filler.open("wb", buffering=0) as out:  # fill what is left of the disk
        with contextlib.suppress(OSError):
            while True:
                out.write(b"\0" * 4096)
    (root / "src" / "new.py").write_text("def added_when_full():\n    pass\n")
    hit = run_cli("search", "charge_credit_card", str(root), "--index", str(index), "--model", str(model), "--json")
    assert hit.code == 0, hit.err
    assert hit.json()["hits"][0]["path"] == "src/shop/payment.py"
    assert "check its permissions" not in hit.err


# ---- 5, 6. ignore files: a bad line, and .gitignore outside a repository ----------------------


def test_a_lone_bang_in_a_gitignore_does_not_abort_the_index(tmp_path: Path, cli) -> None:  # noqa: ANN001
    root = write_tree(tmp_path / "black", {**SAMPLE_REPO, ".git/HEAD": "x\n", "tests/data/.gitignore": "!\n*.out\n",
                                           "tests/data/run.out": "noise\n"})
    result = cli("index", str(root), "--json")
    assert result.code == 0, result.err
    assert result.err.count("not a valid ignore pattern") == 1 and "tests/data/.gitignore line 1" in result.err
    assert result.json()["skipped"]["ignored"] == 1


def test_a_release_tarball_with_a_gitignore_of_slash_star_is_indexed(tmp_path: Path, cli) -> None:  # noqa: ANN001
    # Debian's linux-source: an unpacked tarball whose packaging .gitignore ends with `/*`
    root = write_tree(tmp_path / "linux", {".gitignore": "*.o\n/*\n", "kernel/fork.c": "int do_fork(void) { return 0; }\n"})
    result = cli("index", str(root), "--json")
    assert result.code == 0 and result.json()["files_kept"] == 2, result.err
    (root / ".git").mkdir()
    refused = cli("index", str(root))
    assert refused.code == 2 and refused.err.count("\n") == 1
    assert "nothing to index" in refused.err and ".gitignore line 2 `/*`" in refused.err and "--gitignore never" in refused.err
    assert cli("index", str(root), "--gitignore", "never", "--json").json()["files_kept"] == 2


# ---- 7. defaults that surprise -------------------------------------------------------------------


def test_no_path_means_the_enclosing_repository_and_outline_indexes_the_files_repository(
    tmp_path: Path, sample_repo: Path, cli  # noqa: ANN001
) -> None:
    (sample_repo / ".git").mkdir()
    inside = cli("search", "charge_credit_card", "-k", "1", "--json", cwd=sample_repo / "src" / "shop")
    assert inside.code == 0 and inside.json()["root"] == str(sample_repo.resolve())
    scratch = tmp_path / "scratch"
    write_tree(scratch, {f"junk{i}.py": f"def junk_{i}():\n    pass\n" for i in range(30)})
    outline = cli("outline", str(sample_repo / "src/shop/cart.py"), "--json", cwd=scratch)
    assert outline.code == 0 and outline.json()["symbols"][0]["name"] == "Cart"
    assert not Settings.from_env().index_path_for(scratch.resolve()).exists()  # the scratch folder was not indexed


def test_status_of_a_folder_never_indexed_says_so_and_creates_nothing(tmp_path: Path, cli) -> None:  # noqa: ANN001
    root = write_tree(tmp_path / "fresh", {"a.py": "x = 1\n"})
    result = cli("status", str(root))
    assert result.code == 1 and "has not been indexed yet" in result.out and f"codewhere index {root}" in result.out
    assert cli("status", str(root), "--json").json() == {"root": str(root.resolve()), "indexed": False}
    assert not index_file(root).exists() and not index_file(root).parent.exists()


def test_moving_the_cache_dir_moves_indexes_not_the_built_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CODEWHERE_MODELS_DIR")
    monkeypatch.setenv("CODEWHERE_CACHE_DIR", str(tmp_path / "elsewhere"))
    settings = Settings.from_env()
    assert settings.index_path_for(tmp_path).is_relative_to(tmp_path / "elsewhere")
    assert not settings.model_cache.is_relative_to(tmp_path / "elsewhere")


# ---- 8. the rest -------------------------------------------------------------------------------


def test_a_utf16_source_file_is_indexed_and_found(tmp_path: Path) -> None:
    root = tmp_path / "win"
    root.mkdir()
    (root / "tool.py").write_bytes("def export_report_as_csv(rows):\n    return rows\n".encode("utf-16"))
    with Index.open(root, embedder=FakeEmbedder()) as index:
        report = index.refresh()
        assert report.files_kept == 1 and not report.skipped
        assert index.search("export_report_as_csv", k=1)[0].path == "tool.py"


def test_a_newline_in_a_file_name_keeps_each_hit_on_one_line(tmp_path: Path, cli) -> None:  # noqa: ANN001
    root = tmp_path / "odd"
    root.mkdir()
    (root / "two\nlines.py").write_text("def strange_file_name_needle():\n    return 1\n")
    result = cli("search", "strange_file_name_needle", str(root), "--mode", "keyword", "-k", "1")
    assert result.code == 0
    assert result.out.splitlines()[0].startswith('"two\\nlines.py":1-2')
    assert cli("search", "strange_file_name_needle", str(root), "--json", "-k", "1").json()["hits"][0]["path"] == "two\nlines.py"


def test_a_scope_matching_nothing_says_so(sample_repo: Path, cli) -> None:  # noqa: ANN001
    result = cli("search", "charge", str(sample_repo), "--scope", "lib/")
    assert result.code == 2 and "--scope lib matches no indexed file" in result.err and "--scope src/" in result.err


@pytest.mark.parametrize("size", [100, 4096, 60_000])
def test_a_truncated_index_gets_the_hint_that_works(sample_repo: Path, cli, size: int) -> None:  # noqa: ANN001
    assert cli("index", str(sample_repo)).code == 0
    path = index_file(sample_repo)
    os.truncate(path, min(size, path.stat().st_size - 1))
    for extra in ("-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)
    broken = cli("search", "charge_credit_card", str(sample_repo))
    assert broken.code == 2 and "codewhere index --rebuild" in broken.err and "internal error" not in broken.err
    assert cli("index", str(sample_repo), "--rebuild").code == 0
    assert cli("search", "charge_credit_card", str(sample_repo), "-k", "1").code == 0


@pytest.mark.parametrize("size", [60, 4096])
def test_a_truncated_index_of_index_file_gets_a_hint_that_does_not_loop(sample_repo: Path, tmp_path: Path, cli, size: int) -> None:  # noqa: ANN001
    own = tmp_path / "elsewhere" / "repo.sqlite"
    own.parent.mkdir()
    assert cli("index", str(sample_repo), "--index", str(own)).code == 0
    os.truncate(own, size)
    for extra in ("-wal", "-shm"):
        Path(f"{own}{extra}").unlink(missing_ok=True)
    broken = cli("search", "charge_credit_card", str(sample_repo), "--index", str(own))
    assert broken.code == 2 and f"--rebuild --index {own}" in broken.err
    rebuilt = cli("index", str(sample_repo), "--rebuild", "--index", str(own))
    if size == 60:  # the header's application id is gone: nothing says the file is ours, so it is not deleted
        assert rebuilt.code == 2 and f"rm {own}" in rebuilt.err and own.exists()
        own.unlink()
        rebuilt = cli("index", str(sample_repo), "--index", str(own))
    assert rebuilt.code == 0, rebuilt.err
    assert cli("search", "charge_credit_card", str(sample_repo), "--index", str(own), "-k", "1").code == 0


# ---- 9. secrets -----------------------------------------------------------------------------------

SECRET_CORPUS = json.loads((Path(__file__).parent / "fixtures" / "secret_corpus.json").read_text())
KNOWN_MISSES = {"passwd in ini"}  # an unquoted value of letters only reads like code (`passwd = getpass`)


@pytest.mark.parametrize("case", SECRET_CORPUS["secrets"], ids=lambda c: c["format"])
def test_every_known_secret_format_is_redacted_whole(case: dict[str, str]) -> None:
    from codewhere.redact import REDACTED, redact

    if case["format"] in KNOWN_MISSES:
        pytest.xfail("not caught: see KNOWN_MISSES")
    shown = redact(case["text"])
    assert REDACTED in shown
    for token in re.findall(r"[A-Za-z0-9+/_-]{12,}", case["text"]):
        if any(c.isdigit() for c in token) and any(c.isupper() for c in token) and any(c.islower() for c in token):
            assert token not in shown, f"{case['format']}: {token} still shows in {shown!r}"


@pytest.mark.parametrize("line", SECRET_CORPUS["clean"])
def test_ordinary_code_is_left_alone(line: str) -> None:
    from codewhere.redact import redact

    assert redact(line) == line


def test_redaction_keeps_names_and_quotes(tmp_path: Path) -> None:
    from codewhere.redact import redact

    assert redact('password = "hunter2"\nuser = "ada"') == 'password = "[REDACTED]"\nuser = "ada"'
    assert redact("DATABASE_URL=postgres://app:Sup3rS3cret@db/app") == "DATABASE_URL=postgres://app:[REDACTED]@db/app"


# ---- the concurrency test --------------------------------------------------------------------


def test_an_indexer_a_second_rebuild_and_four_searchers_lose_nothing(big_indexed: tuple[Path, Path]) -> None:
    import threading

    root, model = big_indexed
    errors: list[str] = []
    answers: list[int] = []
    stop = threading.Event()

    def searcher(n: int) -> None:
        with Index.open(root, model=str(model)) as index:
            count = 0
            while not stop.is_set():
                module = n * 100 + count % 50
                count += 1
                try:
                    index.refresh_if_free(vectors=True)
                    hits = index.search(f"handler_{module}_3", k=3, mode=("keyword", "hybrid")[n % 2])
                    answers.append(len(hits))
                    if not hits:
                        errors.append("an empty answer")
                    elif n % 2 == 0 and hits[0].path != f"pkg{module % 20}/mod{module}.py":
                        errors.append(f"handler_{module}_3 found in {hits[0].path}")
                except Exception as exc:  # noqa: BLE001 — any error at all fails the test
                    errors.append(f"{type(exc).__name__}: {exc}")

    indexer = start_cli("index", str(root), "--rebuild", "--model", str(model))
    threads = [threading.Thread(target=searcher, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    wait_for(Path(f"{index_file(root)}.rebuild").exists, what="the rebuild to start")
    second = run_cli("index", str(root), "--rebuild", "--model", str(model), "--wait", "0")
    assert second.code == 2 and "another codewhere process holds" in second.err
    assert indexer.wait(timeout=300) == 0, indexer.stderr.read()
    time.sleep(2)  # searches go on against the swapped-in index
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors[:5]
    assert len(answers) > 20 and all(answers)


# ---- kill -9 at every phase (the small form of benchmarks/crash_bench.py) ------------------------


def test_kill_nine_after_every_indexing_phase_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # one process, so a "vectors" phase exists: with workers the static model embeds in them
    monkeypatch.setenv("CODEWHERE_WORKERS", "1")
    import importlib.util

    spec = importlib.util.spec_from_file_location("crash_bench", Path(__file__).parent.parent / "benchmarks" / "crash_bench.py")
    assert spec and spec.loader
    crash_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(crash_bench)
    tree = many_files(tmp_path / "tree", 450)  # three write batches
    model = make_tiny_model2vec(tmp_path / "tiny")
    result = crash_bench.run(tree, kills=18, model=str(model))
    assert result["failures"] == [] and result["recovered_and_equal"] == 18
    assert {"scan", "chunk", "write", "committed", "vectors", "edges"} <= {k for k, n in result["phases_hit"].items() if n}
    assert "swap" in result["phases_aimed_at"]  # on a small tree the swap is often over before the kill lands


def test_a_query_past_its_deadline_or_cancelled_is_stopped_and_releases_its_turn(sample_repo: Path) -> None:
    import threading

    import apsw

    from codewhere.errors import CodewhereError
    from codewhere.store import sqlite as sqlite_store
    from codewhere.workspace import Workspace

    workspace = Workspace([sample_repo])
    slow_sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000000000) SELECT count(*) FROM n"

    def slow(seconds: float):  # noqa: ANN202
        def work(progress: object) -> object:
            index, _ = workspace.index_for(None)
            with workspace.deadline(index, seconds):
                try:  # a statement that would run for minutes, its errors mapped as the store maps its own
                    return index.store._db.execute(slow_sql).fetchall()  # noqa: SLF001
                except apsw.Error as exc:
                    raise sqlite_store.schema._mapped(index.store.path, exc) or exc from exc
        return work

    workspace.call(lambda progress: workspace.index_for(None))  # the first index and model load, untimed
    started = time.perf_counter()
    with pytest.raises(CodewhereError, match="stopped before it finished"):
        workspace.call(slow(0.5))
    assert time.perf_counter() - started < 20
    assert workspace.call(lambda progress: workspace.index_for(None)[0].search("charge_credit_card", k=1))  # the turn was released

    errors: list[BaseException] = []

    def run() -> None:
        try:
            workspace.call(slow(600))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)
    workspace.interrupt()  # what a cancelled MCP call does
    thread.join(timeout=20)
    assert not thread.is_alive() and errors and "stopped before it finished" in str(errors[0])


def test_a_rebuild_of_an_empty_index_builds_in_place(sample_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Index.open(sample_repo, embedder=FakeEmbedder()) as index:
        monkeypatch.setattr(index.store, "rebuilding", lambda: pytest.fail("built beside an empty index"))
        assert index.refresh(rebuild=True).files_added == len(SAMPLE_REPO)
        assert index.status().files == len(SAMPLE_REPO)
    assert not Path(f"{index_file(sample_repo)}.rebuild").exists()


def test_two_openers_of_a_new_index_at_once_both_get_it(tmp_path: Path) -> None:
    """The MCP server's watcher and its first question open a never-built index together."""
    import threading

    from codewhere.store.sqlite import SqliteStore

    path = tmp_path / "index.sqlite"
    for _ in range(20):
        path.unlink(missing_ok=True)
        barrier, errors, stores = threading.Barrier(4), [], []

        def open_it() -> None:
            barrier.wait()
            try:
                stores.append(SqliteStore.open(path))
            except Exception as exc:  # noqa: BLE001 — the test reports whichever it was
                errors.append(exc)

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        assert {s.meta()["schema_version"] for s in stores} == {stores[0].meta()["schema_version"]}
        for store in stores:
            store.close()
