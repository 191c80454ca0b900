"""Files read and chunked in worker processes: the same index as one process makes, in the same
order; a broken pool or a killed parent loses nothing and leaves nothing running."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import apsw
import psutil
import pytest
import sqlite_vec

from codewhere import reading
from codewhere.api import Index
from codewhere.config import Settings
from codewhere.reading import Chunked, Job, read_files
from codewhere.scan import ScanOptions, scan
from codewhere.types import FileRecord
from tests.conftest import run_cli, write_tree


def many_files(root: Path, n: int = 60) -> Path:
    files: dict[str, str | bytes] = {}
    for i in range(n):
        files[f"pkg/mod{i:03}.py"] = textwrap.dedent(f"""\
            import os


            def handler_{i}(request):
                \"\"\"Answer request number {i}.\"\"\"
                return helper_{(i + 1) % n}(request) + {i}


            def helper_{i}(value):
                return os.path.join(str(value), "part{i}")


            class Thing{i}:
                def method(self):
                    return handler_{i}(self)
            """)
    files["pkg/data.txt"] = b"\0\1\2" * 100
    files["pkg/notes.md"] = "# Notes\n\nThe handlers answer requests.\n"
    return write_tree(root, files)


def jobs_of(root: Path) -> list[Job]:
    return [Job(item, None) for item in scan(root, ScanOptions()) if isinstance(item, FileRecord)]


def test_workers_give_the_outcomes_of_one_process_in_the_same_order(tmp_path: Path, monkeypatch) -> None:
    root = many_files(tmp_path / "repo")
    jobs = jobs_of(root)
    alone = list(read_files(root, jobs, "symbols", False, workers=1))
    monkeypatch.setattr(reading, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(reading, "FILES_PER_TASK", 3)
    pooled = list(read_files(root, jobs, "symbols", False, workers=2))
    assert [job.record.path for job, _ in pooled] == [job.record.path for job in jobs]
    assert pooled == alone
    assert sum(isinstance(outcome, Chunked) for _, outcome in pooled) == 61  # 60 modules and the notes; data.txt is binary


def test_an_index_built_by_two_workers_equals_one_built_by_one(tmp_path: Path, monkeypatch) -> None:
    """Chunks, symbols, edges and every vector to the bit; the workers embed with the static
    model and keep no embedding text, since nothing reads it again."""
    root = many_files(tmp_path / "repo")
    monkeypatch.setattr(reading, "POOL_MIN_BYTES", 0)
    monkeypatch.setenv("CODEWHERE_SHARED_VECTORS", "0")
    tables, vectors, related = {}, {}, {}
    for workers in (1, 2):
        db = tmp_path / f"w{workers}.db"
        with Index.open(root, db, settings=Settings.from_env(), workers=workers) as index:
            report = index.refresh()
            assert report.files_added == 61 and report.skipped["binary"] == 1
            assert report.vectors_written == index.store.vector_count() > 100
            assert [h.path for h in index.search("helper_7", mode="keyword", k=1)] == ["pkg/mod007.py"]
            related[workers] = [(h.path, h.start_line) for h in index.related("pkg/mod003.py", 5)]
        connection = apsw.Connection(str(db))
        tables[workers] = {
            table: connection.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("files", "symbols", "edges", "definitions")
        }
        tables[workers]["chunks"] = connection.execute(
            "SELECT id, file_id, start_line, end_line, content_hash, text, embed_text IS NULL, unit_name FROM chunks ORDER BY id"
        ).fetchall()
        embed_texts = {row[0] for row in connection.execute("SELECT embed_text FROM chunks WHERE embed_text IS NOT NULL")}
        assert (embed_texts == {""}) == (workers == 2)
        connection.enable_load_extension(True)
        sqlite_vec.load(connection)
        vectors[workers] = dict(connection.execute(
            "SELECT e.content_hash, v.embedding FROM embeddings e JOIN vec_chunks v ON v.rowid = e.id").fetchall())
        connection.close()
    assert tables[1] == tables[2]
    assert vectors[1] == vectors[2]
    assert related[1] == related[2] and related[1]


def test_workers_embed_new_files_and_a_changed_file_only_its_new_texts(tmp_path: Path, monkeypatch) -> None:
    # a branch switch through the workers embedded every chunk of every changed file (23,495
    # texts on Django 5.0.10 -> 5.1.4, of which 4,222 were new) and kept the index's vectors
    root = many_files(tmp_path / "repo")
    monkeypatch.setattr(reading, "POOL_MIN_BYTES", 0)
    monkeypatch.setenv("CODEWHERE_SHARED_VECTORS", "0")
    with Index.open(root, tmp_path / "index.db", settings=Settings.from_env(), workers=2) as index:
        first = index.refresh()
        assert first.vectors_written == index.store.vector_count() > 100
        for i in range(0, 60, 2):  # thirty files: one new function each, the rest as it was
            with (root / f"pkg/mod{i:03}.py").open("a") as module:
                module.write(f"\n\ndef added_{i}(value):\n    return value * {i}\n")
        second = index.refresh()
        assert second.files_changed == 30
        assert second.vectors_written == 30
        assert index.store.vector_count() == first.vectors_written + 30
        assert [h.path for h in index.search("added_12", mode="semantic", k=1)] == ["pkg/mod012.py"]


def test_a_worker_killed_mid_run_costs_a_warning_and_no_file(tmp_path: Path, monkeypatch, caplog) -> None:
    root = many_files(tmp_path / "repo", n=120)
    jobs = jobs_of(root)
    monkeypatch.setattr(reading, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(reading, "FILES_PER_TASK", 2)
    monkeypatch.setattr(reading, "TASKS_IN_FLIGHT", 1)
    outcomes = read_files(root, jobs, "symbols", False, workers=2)
    got = [next(outcomes)]
    for child in _pool_workers():
        with contextlib.suppress(psutil.NoSuchProcess):  # one of an earlier pool may be exiting
            child.send_signal(signal.SIGKILL)
    got += list(outcomes)
    assert [job.record.path for job, _ in got] == [job.record.path for job in jobs]
    assert got == list(read_files(root, jobs, "symbols", False, workers=1))
    assert "reading the remaining files in this process" in caplog.text
    assert "__main__" not in caplog.text  # pytest runs as a module: no script to guard


def test_workers_of_a_killed_indexer_exit(tmp_path: Path) -> None:
    root = many_files(tmp_path / "repo", n=400)
    script = textwrap.dedent(f"""\
        import sys, time, psutil
        from pathlib import Path
        from codewhere import reading
        from codewhere.reading import Job, read_files
        from codewhere.scan import ScanOptions, scan
        from codewhere.types import FileRecord
        root = Path({str(root)!r})
        jobs = [Job(i, None) for i in scan(root, ScanOptions()) if isinstance(i, FileRecord)]
        reading.POOL_MIN_BYTES = 0
        outcomes = read_files(root, jobs, "symbols", False, workers=2)
        next(outcomes)
        print(" ".join(str(c.pid) for c in psutil.Process().children(recursive=True)), flush=True)
        time.sleep(600)
        """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    workers = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(workers) >= 2
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.2)
    assert not [pid for pid in workers if _alive(pid)]


def _pool_workers() -> list[psutil.Process]:
    """This process's spawned workers (not multiprocessing's resource tracker, nor a child of an
    earlier test that exits while we look: CI saw one go between the listing and its cmdline)."""
    workers = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.NoSuchProcess):
            if any("spawn_main" in part for part in child.cmdline()):
                workers.append(child)
    return workers


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_workers_must_be_a_positive_number(tmp_path: Path, value: str) -> None:
    result = run_cli("index", str(many_files(tmp_path / "repo", n=2)), "--workers", value)
    assert result.code == 2
    assert "is not a whole number of at least 1" in result.err and "Traceback" not in result.err


def test_a_killed_indexers_model_file_is_removed_by_the_next_pool(tmp_path: Path, monkeypatch) -> None:
    """A SIGKILLed indexer cannot delete the model it pickled for its workers (16 MB in the
    temporary folder each time); the next indexer's pool removes the files of dead processes."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    dead_pid = int(finished.stdout)
    orphan = tmp_path / f"{reading.MODEL_FILE_PREFIX}{dead_pid}-abc.pickle"
    running = tmp_path / f"{reading.MODEL_FILE_PREFIX}{os.getppid()}-def.pickle"
    unrelated = tmp_path / f"{reading.MODEL_FILE_PREFIX}old.pickle"
    for path in (orphan, running, unrelated):
        path.write_bytes(b"x")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    mine = reading._model_file({"a": "model"})  # type: ignore[arg-type]
    try:
        assert mine.name.startswith(f"{reading.MODEL_FILE_PREFIX}{os.getpid()}-")
        assert not orphan.exists()
        assert running.exists() and unrelated.exists()
        assert reading.remove_orphan_model_files(tmp_path) == 0
    finally:
        mine.unlink()


def test_a_broken_pool_under_a_script_without_a_main_guard_names_the_guard(tmp_path: Path, monkeypatch) -> None:
    """Spawned workers import `python script.py`'s script again: one that indexes at import dies
    there (it cannot start a pool, nor take the writer lock its parent holds)."""
    import types

    script = tmp_path / "build_it.py"
    script.write_text("from codewhere.api import Index\nIndex.open('.').refresh()\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    main.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert reading._script_hint() == ' (if build_it.py indexes when imported, put that under `if __name__ == "__main__":`)'
    script.write_text("from codewhere.api import Index\nif __name__ == '__main__':\n    Index.open('.').refresh()\n")
    assert reading._script_hint() == ""  # guarded: the pool broke for another reason
    script.unlink()
    assert reading._script_hint() == ""
    main.__spec__ = importlib.util.spec_from_loader("tool", loader=None)  # `python -m tool`: not imported again
    script.write_text("from codewhere.api import Index\nIndex.open('.').refresh()\n")
    assert reading._script_hint() == ""
