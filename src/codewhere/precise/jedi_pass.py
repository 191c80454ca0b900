"""Precise Python without a separate tool: jedi (pure Python, in-process) says where each call,
base class and imported name of a Python file is defined, following assignments, imports and
`self.` attributes that name resolution can only guess at.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from codewhere import confined
from codewhere.graph import PreciseAnswer
from codewhere.precise.sites import PassRun, name_column, sites_by_file
from codewhere.types import EdgeSite

log = logging.getLogger(__name__)

PYTHON_SUFFIXES = (".py", ".pyi")


def _project(root: Path) -> object:
    import jedi

    # the repository's own packages before anything installed (jedi's added paths come after the
    # environment's, so a release of the same package installed here would win): `src/` first
    first = [str(p) for p in (root / "src", root) if p.is_dir()]
    installed = [p for p in jedi.get_default_environment().get_sys_path() if p not in first]
    return jedi.Project(root, sys_path=first + installed, smart_sys_path=True, load_unsafe_extensions=False)


def jedi_answers(
    root: Path, sites: Iterable[EdgeSite], on_file: Callable[[int, int, str], None] | None = None
) -> tuple[list[PreciseAnswer], PassRun]:
    """Ask jedi about every edge of `sites` in a Python file. A definition inside `root` is an
    answer with its place; one outside (a library, the standard library) an answer with none; a
    name jedi cannot follow gives no answer, and name resolution stands."""
    import jedi

    by_file = sites_by_file(sites, PYTHON_SUFFIXES)
    run = PassRun(files=len(by_file))
    started = time.perf_counter()
    project = _project(root)
    resolved_root = root.resolve()
    answers: list[PreciseAnswer] = []
    for n, (path, file_sites) in enumerate(sorted(by_file.items()), start=1):
        if on_file:
            on_file(n, len(by_file), path)
        try:
            source = confined.read_text(root, path)
            script = jedi.Script(source, path=root / path, project=project)
        except Exception as exc:  # jedi's parser and inference fail in many ways on odd files
            log.warning("jedi could not read %s (%s); its edges keep name resolution", path, exc)
            continue
        lines = source.split("\n")
        for site in file_sites:
            run.sites += 1
            if not 1 <= site.line <= len(lines):
                continue
            column = name_column(lines[site.line - 1], site.target_name)
            if column is None:
                continue
            try:
                found = script.goto(site.line, column, follow_imports=True)
            except Exception as exc:  # one bad inference must not cost the file
                log.debug("jedi failed at %s:%d (%s)", path, site.line, exc)
                continue
            answer = _answer(site, found, resolved_root)
            if answer is not None:
                answers.append(answer)
                run.answered += 1
    run.seconds = time.perf_counter() - started
    return answers, run


def _answer(site: EdgeSite, found: Sequence[object], root: Path) -> PreciseAnswer | None:
    for name in found:
        module_path = getattr(name, "module_path", None)
        line = getattr(name, "line", None)
        if module_path is None or line is None:
            continue  # a builtin jedi knows only by name: not this repository's
        try:
            rel = Path(module_path).resolve().relative_to(root).as_posix()
        except ValueError:
            return PreciseAnswer(site.path, site.line, site.target_name, None)
        return PreciseAnswer(site.path, site.line, site.target_name, rel, int(line), str(getattr(name, "name", "")))
    if found:
        return PreciseAnswer(site.path, site.line, site.target_name, None)
    return None
