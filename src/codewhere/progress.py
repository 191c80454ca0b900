"""Long work shown to a person: a progress bar on a terminal (files, vectors, the model build, with
a rate and an estimate), and off a terminal a line on stderr every few seconds with the counts.
The CLI asks for one; the library itself only reports `indexer.Step`s."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from codewhere.indexer import Step

LINE_SECONDS = 5.0  # off a terminal: a line at most this often (and none for work shorter than that)
PHASE_LINE_SECONDS = 1.0  # ...and one as each phase that took this long ends (scanning Django: 3.4 s, silent before)
PHASE_WORDS = {"scan": "scanning", "files": "reading files", "edges": "resolving call edges", "vectors": "embedding chunks",
               "model": "building the default model", "tier": "quality tier: embedding with MiniLM"}
UNITS = {"scan": "files", "files": "files", "vectors": "chunks", "model": "tokens", "edges": "", "tier": "texts"}


class ConsoleLogHandler(logging.Handler):
    """Log lines printed through the console that draws the bar, so a warning appears above a
    live bar instead of being overwritten by it."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.print(self.format(record), highlight=False, markup=False, soft_wrap=True)
        except Exception:  # logging must never raise into the work it describes
            self.handleError(record)


class LineReporter:
    """Off a terminal: `codewhere: reading files 1,200/5,000 (240/s, about 16 s left)` at most
    every LINE_SECONDS, so a log or a CI job shows a long index is moving."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.clock = clock
        self.started = clock()
        self.last_line = self.started
        self.phase = ""
        self.phase_started = self.started
        self.last_step: Step | None = None

    def __call__(self, step: Step) -> None:
        now = self.clock()
        if step.phase != self.phase:
            self.finish(now)  # a phase that took a while says so as it ends, even if it never reached a line
            self.phase, self.phase_started = step.phase, now
        self.last_step = step
        if now - self.last_line < LINE_SECONDS:
            return
        self.last_line = now
        self.console.print(f"codewhere: {describe(step, now - self.phase_started)}", highlight=False, markup=False,
                           soft_wrap=True)

    def finish(self, now: float | None = None) -> None:
        """The phase under way is over: one line for it when it took PHASE_LINE_SECONDS or more."""
        now = self.clock() if now is None else now
        step, seconds = self.last_step, now - self.phase_started
        if step is not None and self.phase and seconds >= PHASE_LINE_SECONDS:
            counted = f" {step.done:,} {UNITS.get(step.phase, '')}".rstrip() if step.done else ""
            self.console.print(f"codewhere: {PHASE_WORDS.get(step.phase, step.phase)}{counted}: done in {seconds:,.1f} s",
                               highlight=False, markup=False, soft_wrap=True)
            self.last_line = now
        self.last_step = None


def describe(step: Step, seconds: float) -> str:
    """One step in words, with a rate and an estimate where a total is known."""
    words = PHASE_WORDS.get(step.phase, step.phase)
    unit = UNITS.get(step.phase, "")
    if step.phase == "edges":
        return words
    counted = f"{step.done:,}/{step.total:,}" if step.total else f"{step.done:,}"
    text = f"{words} {counted} {unit}".rstrip()
    if seconds > 0 and step.done:
        rate = step.done / seconds
        text += f" ({rate:,.0f}/s"
        if step.total and step.total > step.done:
            text += f", about {(step.total - step.done) / rate:,.0f} s left"
        text += ")"
    return text


class RateColumn(ProgressColumn):
    """Items a second (rich's own speed column counts bytes)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f}/s" if speed else "", style="dim")


class BarReporter:
    """On a terminal: one bar per phase, a spinner while the total is unknown."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, step: Step) -> None:
        task = self.tasks.get(step.phase)
        if task is None:
            for other in self.tasks.values():  # the phase before is over
                self.bar.update(other, visible=False)
            task = self.tasks[step.phase] = self.bar.add_task(PHASE_WORDS.get(step.phase, step.phase), total=step.total, path="")
        self.bar.update(task, completed=step.done, total=step.total, path=step.detail[-50:])


@contextmanager
def reporter(console: Console, quiet: bool = False) -> Iterator[Callable[[Step], None] | None]:
    """What the CLI hands the indexer: a bar on a terminal, lines elsewhere, nothing when quiet."""
    if quiet:
        yield None
        return
    if not console.is_terminal:
        lines = LineReporter(console)
        yield lines
        lines.finish()
        return
    with Progress(*bar_columns(console.width), console=console, transient=True) as bar:
        yield BarReporter(bar)


def bar_columns(width: int) -> list[ProgressColumn]:
    """The bar's fields for a terminal `width` wide: on 80 columns every field whole (rich cut
    its own fields to "48… 395… 0:00…" there), the file being read only where there is room."""
    columns: list[ProgressColumn] = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=12 if width < 100 else 30),
                                     MofNCompleteColumn(), RateColumn(), TextColumn("eta"), TimeRemainingColumn()]
    if width >= 120:
        columns[-2:-2] = [TimeElapsedColumn()]
        columns.append(TextColumn("[dim]{task.fields[path]}"))
    return columns


def model_build_steps(show: Callable[[Step], None]) -> Callable[[int, int], None]:
    """The model build's (done, total) as steps of the `model` phase."""
    return lambda done, total: show(Step("model", done, total))
