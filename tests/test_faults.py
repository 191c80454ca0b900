"""The faults a real user hits: each one loses nothing and hangs nothing (issue: nothing lost,
nothing wedged). Every test here failed on the code before its fix."""

from __future__ import annotations

import os
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
