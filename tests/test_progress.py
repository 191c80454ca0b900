"""Long work shows progress: a bar on a terminal, a line every few seconds elsewhere, nothing with --quiet."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from rich.console import Console

from codewhere.api import Index
from codewhere.config import Settings
from codewhere.embed.fake import FakeEmbedder
from codewhere.indexer import Step
from codewhere.progress import LINE_SECONDS, ConsoleLogHandler, LineReporter, describe, reporter
from tests.conftest import write_tree


def many_files(n: int = 60) -> dict[str, str | bytes]:
    return {f"pkg/mod_{i}.py": f"def function_number_{i}(value):\n    return value + {i}\n" for i in range(n)}


def test_an_index_run_reports_every_phase_with_totals(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", many_files())
    steps: list[Step] = []
    with Index.open(root, settings=Settings.from_env(), embedder=FakeEmbedder()) as index:
        index.refresh(steps.append)
    files = [s for s in steps if s.phase == "files"]
    assert [s.done for s in files] == list(range(1, 61)) and {s.total for s in files} == {60}
    assert all(s.detail.startswith("pkg/mod_") for s in files)
    vectors = [s for s in steps if s.phase == "vectors"]
    assert vectors and vectors[-1].done == vectors[-1].total == 60
    phases = [s.phase for s in steps]
    assert phases.index("edges") > phases.index("files") and phases.index("vectors") > phases.index("edges")


def test_off_a_terminal_a_line_every_few_seconds_with_a_rate_and_an_estimate() -> None:
    out = io.StringIO()
    now = [100.0]
    report = LineReporter(Console(file=out, force_terminal=False, width=200), clock=lambda: now[0])
    for done in range(1, 1001):
        now[0] += 0.01  # 100 files a second: ten seconds in all
        report(Step("files", done, 1000, f"src/f{done}.py"))
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 // LINE_SECONDS  # one at 5 s, one at 10 s
    assert lines[0].startswith("codewhere: reading files 500/1,000 files (100/s, about 5 s left)")


def test_work_shorter_than_the_interval_prints_nothing() -> None:
    out = io.StringIO()
    report = LineReporter(Console(file=out, force_terminal=False), clock=lambda: 0.0)
    for done in range(1, 100):
        report(Step("files", done, 100))
    assert out.getvalue() == ""


def test_describe_says_each_phase_in_words() -> None:
    assert describe(Step("scan", 1500), 3.0) == "scanning 1,500 files (500/s)"
    assert describe(Step("vectors", 256, 1024), 2.0) == "embedding chunks 256/1,024 chunks (128/s, about 6 s left)"
    assert describe(Step("edges", 0), 1.0) == "resolving call edges"


def test_on_a_terminal_a_bar_per_phase_and_log_lines_above_it(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", many_files())
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160)
    log = logging.getLogger("codewhere.test_progress")
    handler = ConsoleLogHandler(console)
    handler.setFormatter(logging.Formatter("codewhere: %(message)s"))
    log.addHandler(handler)
    try:
        with reporter(console) as progress, Index.open(root, settings=Settings.from_env(), embedder=FakeEmbedder()) as index:
            assert progress is not None
            index.refresh(progress)
            log.warning("a warning while the bar is live")
    finally:
        log.removeHandler(handler)
    shown = out.getvalue()
    assert "reading files" in shown and "embedding chunks" in shown and "60/60" in shown
    assert "codewhere: a warning while the bar is live\n" in shown.replace("\r", "\n")


def test_quiet_reports_nothing() -> None:
    with reporter(Console(file=io.StringIO(), force_terminal=True), quiet=True) as progress:
        assert progress is None


def test_cli_quiet_before_or_after_the_command_leaves_stderr_empty(sample_repo: Path, cli) -> None:  # noqa: ANN001
    for args in (("--quiet", "index", str(sample_repo)), ("index", str(sample_repo), "--quiet")):
        result = cli(*args)
        assert result.code == 0 and result.err == "", args


def test_off_a_terminal_each_phase_that_took_a_while_says_so_as_it_ends() -> None:
    """Issue 52: scanning Django (3.4 s) and the call edges (3 s) printed nothing off a terminal."""
    out = io.StringIO()
    now = [0.0]
    report = LineReporter(Console(file=out, force_terminal=False, width=200), clock=lambda: now[0])
    for done in range(1, 35):
        now[0] += 0.1
        report(Step("scan", done * 200))  # 3.4 s of scanning: under LINE_SECONDS, so no count line
    report(Step("edges", 0))
    now[0] += 0.2
    report(Step("files", 1, 10))  # the edges took 0.2 s: no line
    now[0] += 1.5
    report.finish()
    assert out.getvalue().splitlines() == ["codewhere: scanning 6,800 files: done in 3.3 s",
                                           "codewhere: reading files 1 files: done in 1.5 s"]


def test_the_bar_fits_an_80_column_terminal_with_its_fields_whole(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80)
    with reporter(console) as progress:
        assert progress is not None
        for done in range(1, 396):
            progress(Step("files", done, 4812, "django/db/models/query.py"))
        progress.bar.refresh()  # type: ignore[attr-defined]
        shown = [line for line in out.getvalue().replace("\r", "\n").splitlines() if "reading files" in line]
    assert shown and "…" not in shown[-1] and "395/4812" in shown[-1]
