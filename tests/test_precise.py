"""Precise graph sources: SCIP files made by the real indexers (scip-python, scip-typescript;
the small `index.scip` files beside each fixture) and jedi, merged over name resolution."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from codewhere import graph
from codewhere.api import Index
from codewhere.graph import PreciseAnswer, Resolution, precise_targets
from codewhere.precise.lsp import Server, installed_servers, lsp_answers
from codewhere.precise.scip import descriptor_name, read_scip
from codewhere.types import EdgeSite, SymbolSpan
from tests.conftest import bump_mtime

FIXTURES = Path(__file__).with_name("fixtures") / "precise"


def copied(tmp_path: Path, language: str) -> Path:
    root = tmp_path / language
    shutil.copytree(FIXTURES / language, root)
    return root


def callee(index: Index, spec: str, name: str) -> graph.Reference:
    (found,) = [r for r in index.callees(spec)[1] if r.target_name == name]
    return found


def test_scip_python_replaces_what_names_alone_got_wrong(tmp_path: Path, open_index) -> None:
    root = copied(tmp_path, "python")
    index = open_index(root)
    index.refresh(vectors=False)
    # names alone: the caller's own class wins, and the only `loads` in the repository is taken
    assert callee(index, "Writer.copy", "read").target.qualified_name == "Writer.read"
    assert callee(index, "parse", "loads").target.qualified_name == "loads"

    merged = open_index(root, scip=root / "index.scip")
    report = merged.refresh(vectors=False)
    assert report.precise and "scip-python" in report.precise[0] and not report.precise_problems
    read = callee(merged, "Writer.copy", "read")
    assert (read.target.qualified_name, read.resolution) == ("Reader.read", Resolution.SCIP)
    loads = callee(merged, "parse", "loads")
    assert loads.target is None and loads.resolution == Resolution.SCIP  # json.loads: not this repository's
    assert callee(merged, "parse_csv", "loads").target.qualified_name == "loads"  # the repository's own

    # an unrelated edit re-resolves names, and the precise answers elsewhere stay
    (root / "app.py").write_text((root / "app.py").read_text() + "\n\ndef extra():\n    return main()\n")
    bump_mtime(root / "app.py")
    again = merged.refresh(vectors=False)
    assert again.files_changed == 1 and not again.precise  # the same SCIP file is not merged twice
    assert callee(merged, "Writer.copy", "read").resolution == Resolution.SCIP
    # the edited file's edges are new: names resolve them until the SCIP index is made again
    assert callee(merged, "extra", "main").resolution == Resolution.SAME_FILE


def test_scip_typescript_resolves_a_method_on_another_class(tmp_path: Path, open_index) -> None:
    root = copied(tmp_path, "typescript")
    index = open_index(root, scip=root / "index.scip")
    index.refresh(vectors=False)
    area = callee(index, "Square.double", "area")
    assert (area.target.qualified_name, area.resolution) == ("Circle.area", Resolution.SCIP)
    _, callers = index.callers("Square.area")
    assert [(r.source.qualified_name, r.resolution) for r in callers] == [("report", Resolution.SCIP)]


def test_a_stale_scip_document_is_refused_and_reported(tmp_path: Path, open_sqlite_index) -> None:
    root = copied(tmp_path, "python")
    store_py = root / "store.py"
    store_py.write_text('"""Moved down by a line."""\n' + store_py.read_text())  # every definition one line lower
    index = open_sqlite_index(root, scip=root / "index.scip")
    report = index.refresh(vectors=False)
    assert len(report.precise_problems) == 1 and report.precise_problems[0].startswith("store.py: changed since")
    # store.py keeps name resolution (and its wrong guess); the other documents were merged
    assert callee(index, "Writer.copy", "read").resolution == Resolution.SAME_FILE
    assert callee(index, "parse", "loads").resolution == Resolution.SCIP
    # a reference into the refused document is not answered from it either
    assert callee(index, "main", "copy").resolution != Resolution.SCIP


def test_scip_documents_of_files_not_indexed_are_reported(tmp_path: Path) -> None:
    root = copied(tmp_path, "python")
    reading = read_scip(root / "index.scip", root, {"app.py", "store.py"})
    assert reading.missing == ["codec.py"] and reading.tool == "scip-python 0.6.6"
    # `parse_csv` is defined in the missing document: app.py's reference to it is not answered
    assert not [a for a in reading.answers if a.path == "app.py" and a.name == "parse_csv"]
    assert [a for a in reading.answers if a.path == "app.py" and a.name == "Writer"][0].target_path == "store.py"


@pytest.mark.parametrize("content, expected", [
    (None, "no SCIP file at"),
    (b"not a scip index at all \xff\xff", "is not a SCIP index"),
    (b"", "holds no SCIP documents"),
])
def test_a_bad_scip_file_is_one_line_and_loses_nothing(tmp_path: Path, cli, content: bytes | None, expected: str) -> None:
    root = copied(tmp_path, "python")
    scip = tmp_path / "given.scip"
    if content is not None:
        scip.write_bytes(content)
    result = cli("index", str(root), "--scip", str(scip), "-q")
    assert result.code == 2 and expected in result.err and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert cli("callers", "Writer.copy", str(root)).code == 0  # the index itself was written


def test_a_configured_scip_file_that_went_missing_warns_and_indexes(tmp_path: Path, cli) -> None:
    root = copied(tmp_path, "python")
    (root / "codewhere.toml").write_text('[graph]\nscip = "gone.scip"\n')
    result = cli("index", str(root), "-q")
    assert result.code == 0 and "no SCIP file at" in result.err and "gone.scip" in result.err


def test_jedi_resolves_a_method_call_through_an_assignment(tmp_path: Path, open_index) -> None:
    root = copied(tmp_path, "python")
    index = open_index(root, precise=True)
    report = index.refresh(vectors=False)
    assert report.precise and report.precise[0].startswith("jedi (3 files")
    read = callee(index, "Writer.copy", "read")
    assert (read.target.qualified_name, read.resolution) == ("Reader.read", Resolution.JEDI)
    assert callee(index, "parse", "loads").target is None  # json.loads, outside the repository
    assert callee(index, "parse_csv", "loads").target.qualified_name == "loads"

    assert not index.refresh(vectors=False).precise  # nothing changed: jedi reads nothing
    codec = root / "codec.py"
    codec.write_text(codec.read_text() + "\n\ndef again(raw):\n    return parse(raw)\n")
    bump_mtime(codec)
    report = index.refresh(vectors=False)
    assert report.precise[0].startswith("jedi (1 file,")  # only the changed file
    assert callee(index, "again", "parse").resolution == Resolution.JEDI
    assert callee(index, "Writer.copy", "read").resolution == Resolution.JEDI


def test_min_confidence_and_the_weakest_link_of_impact(tmp_path: Path, open_sqlite_index) -> None:
    root = copied(tmp_path, "python")
    index = open_sqlite_index(root)
    index.refresh(vectors=False)
    _, found = index.impact("loads")
    by_name = {i.symbol.qualified_name: i for i in found.items}
    # parse_csv → loads is same-file; main → parse_csv crosses an import
    assert by_name["parse_csv"].weakest == Resolution.SAME_FILE
    assert by_name["main"].weakest == Resolution.SAME_FILE  # the weaker of import and same-file
    assert by_name["parse"].weakest == Resolution.SAME_FILE  # names alone think json.loads is ours
    assert index.impact("loads", min_confidence="scip")[1].items == []
    assert [r.resolution for r in index.callers("parse_csv", min_confidence="import")[1]] == [Resolution.IMPORT]
    assert index.callers("parse_csv", min_confidence="scip")[1] == []

    merged = open_sqlite_index(root, scip=root / "index.scip")
    merged.refresh(vectors=False)
    items = {i.symbol.qualified_name: i for i in merged.impact("loads")[1].items}
    assert set(items) == {"parse_csv", "main"} and {i.weakest for i in items.values()} == {Resolution.SCIP}
    with pytest.raises(graph.QueryError, match="unknown confidence level"):
        merged.callers("loads", min_confidence="certain")


def test_precise_targets_take_the_innermost_symbol_and_know_a_non_symbol() -> None:
    sites = [EdgeSite(1, "a.py", 10, "run", "call"), EdgeSite(2, "a.py", 11, "hook", "call"),
             EdgeSite(3, "a.py", 12, "dumps", "call"), EdgeSite(4, "a.py", 13, "other", "call")]
    spans = [SymbolSpan(7, "b.py", "run", 1, 40), SymbolSpan(8, "b.py", "run", 20, 30), SymbolSpan(9, "b.py", "Job", 18, 31)]
    answers = [PreciseAnswer("a.py", 10, "run", "b.py", 21, "run"),
               PreciseAnswer("a.py", 11, "hook", "a.py", 2, "hook"),  # a parameter: no symbol
               PreciseAnswer("a.py", 12, "dumps", None)]  # a library
    assert precise_targets(sites, spans, answers, "scip") == [(1, 8, "scip"), (2, None, "scip"), (3, None, "scip")]


@pytest.mark.parametrize("symbol, name", [
    ("scip-python python requests 2.32.3 `src.requests.api`/get().", "get"),
    ("scip-python python requests 2.32.3 `src.requests.sessions`/Session#request().", "request"),
    ("scip-typescript npm fixture 1 `shapes.ts`/Square#", "Square"),
    ("scip-python python requests 2.32.3 `src.requests.utils`/DEFAULT_CA_BUNDLE_PATH.", "DEFAULT_CA_BUNDLE_PATH"),
    ("rust-analyzer cargo std 1.0 io/Write#flush(+1).", "flush"),
    ("scip-typescript npm zod 3 `src/v3/ZodError.ts`/ZodError#`<get>errors`().", "errors"),
    ("scip-typescript npm zod 3 `src/v3/types.ts`/ZodType#`<constructor>`().", "constructor"),
    ("scip-python python requests 2.32.3 `src.requests.compat`/", None),
    ("scip-python python requests 2.32.3 `src.requests.api`/get().(url)", None),
    ("local 12", None),
])
def test_descriptor_names(symbol: str, name: str | None) -> None:
    assert descriptor_name(symbol) == name


# ---- language servers ----------------------------------------------------------------------------
# CI installs pyright and typescript-language-server from npm and points CODEWHERE_TEST_LSP_PATH at
# them (CODEWHERE_TEST_LSP=1 makes their absence a failure); elsewhere these tests skip.

LSP_PATH = os.environ.get("CODEWHERE_TEST_LSP_PATH", "")


def servers_or_skip(language: str) -> list[Server]:
    found = [s for s in installed_servers(LSP_PATH or None) if s.speaks(language)] if LSP_PATH else []
    if not found:
        if os.environ.get("CODEWHERE_TEST_LSP") == "1":
            pytest.fail(f"no {language} language server under CODEWHERE_TEST_LSP_PATH={LSP_PATH!r}")
        pytest.skip("no language server installed (set CODEWHERE_TEST_LSP_PATH)")
    return found


@pytest.mark.parametrize("language, spec, name, expected", [
    ("python", "Writer.copy", "read", "Reader.read"),
    ("typescript", "Square.double", "area", "Circle.area"),
])
def test_a_language_server_resolves_what_names_alone_got_wrong(
    tmp_path: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch, language: str, spec: str, name: str, expected: str,
) -> None:
    servers_or_skip(language)
    monkeypatch.setenv("PATH", f"{LSP_PATH}{os.pathsep}{os.environ['PATH']}")
    root = copied(tmp_path, language)
    index = open_sqlite_index(root, lsp=True)
    report = index.refresh(vectors=False)
    assert any(line.startswith(("pyright-langserver", "typescript-language-server")) for line in report.precise)
    found = callee(index, spec, name)
    assert (found.target.qualified_name, found.resolution) == (expected, Resolution.LSP)
    if language == "python":
        assert callee(index, "parse", "loads").target is None  # json.loads
    else:  # across files: the call in main.ts reaches Square.area in shapes.ts
        assert [(r.source.qualified_name, r.resolution) for r in index.callers("Square.area")[1]] == [("report", Resolution.LSP)]
    assert not index.refresh(vectors=False).precise  # nothing changed: no server is started


def test_clangd_tells_a_call_through_a_field_from_a_function_of_that_name(
    tmp_path: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch,
) -> None:
    servers_or_skip("c")
    monkeypatch.setenv("PATH", f"{LSP_PATH}{os.pathsep}{os.environ['PATH']}")
    root = copied(tmp_path, "c")
    index = open_sqlite_index(root)
    index.refresh(vectors=False)
    before = {(r.line, r.target_name): r for r in index.callees("total")[1]}
    assert before[(9, "area")].target.qualified_name == "area"  # names alone: `s.area(&s)` is main.c's area
    index = open_sqlite_index(root, lsp=True)
    index.refresh(vectors=False)
    after = {(r.line, r.target_name): r for r in index.callees("total")[1]}
    assert after[(9, "area")].target is None and after[(9, "area")].resolution == Resolution.LSP  # the struct's field
    assert after[(10, "area")].target.path == "main.c"  # the static function, on the next line
    assert (after[(10, "square_area")].target.path, after[(10, "square_area")].resolution) == ("shapes.c", Resolution.LSP)


def test_no_language_server_is_one_line(tmp_path: Path, open_sqlite_index, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    root = copied(tmp_path, "python")
    report = open_sqlite_index(root, lsp=True).refresh(vectors=False)
    assert report.precise == ["LSP: no language server installed (pyright-langserver, typescript-language-server, "
                              "clangd); the graph keeps name resolution"]


@pytest.mark.parametrize("command", [("sleep", "600"), ("false",), ("sh", "-c", "echo garbage; sleep 600")])
def test_a_hung_or_crashing_server_costs_a_warning_not_the_index(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, command: tuple[str, ...],
) -> None:
    root = copied(tmp_path, "python")
    server = Server("broken", command, (".py",), ((".py", "python"),))
    started = time.monotonic()
    answers, runs = lsp_answers(root, [EdgeSite(1, "store.py", 15, "read", "call")], [server],
                                request_seconds=1, start_seconds=2)
    assert answers == [] and runs["broken"].failed
    assert time.monotonic() - started < 10
    assert "the language server broken" in caplog.text
    leftover = subprocess.run(["pgrep", "-f", "sleep 600"], capture_output=True, text=True).stdout.split()
    assert not leftover  # its whole process group was killed
