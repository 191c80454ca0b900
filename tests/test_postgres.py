"""What only the shared PostgreSQL index does: many repositories, many writers and readers at once.

The rest of the suite runs on both stores through the `store_kind` fixture.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from codewhere.api import Index, SearchRequest
from codewhere.config import Settings, redact_dsn
from codewhere.embed.fake import FakeEmbedder
from codewhere.errors import IndexBusyError, IndexFileError, ModelError, QueryError
from codewhere.store.pg_schema import PARTITIONED, REPO_ID_SHIFT, SCHEMA_VERSION, TEXT_MIGRATIONS
from codewhere.store.postgres import tsquery_text
from codewhere.types import Filters, TermQuery
from tests.conftest import SAMPLE_REPO, write_tree


@pytest.fixture
def team_dsn(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CODEWHERE_DSN", pg_dsn)
    return pg_dsn


def _open(root: Path, repo: str | None = None, **kwargs: object) -> Index:
    return Index.open(root, settings=Settings.from_env(), repo=repo, **kwargs)  # type: ignore[arg-type]


def test_two_repositories_share_one_database_and_search_names_them(tmp_path: Path, team_dsn: str) -> None:
    shop = write_tree(tmp_path / "shop", SAMPLE_REPO)
    other = write_tree(tmp_path / "billing", {"charge.py": "def charge_credit_card(card):\n    return card\n"})
    fake = FakeEmbedder()
    with _open(shop, embedder=fake) as a, _open(other, embedder=fake) as b:
        a.refresh()
        b.refresh()
        assert a.shared and sorted(a.repositories()) == ["billing", "shop"]
        both = {(h.repo, h.path) for h in a.search("charge_credit_card", k=20)}
        assert ("shop", "src/shop/payment.py") in both and ("billing", "charge.py") in both
        only = a.search("charge_credit_card", k=20, repos=["billing"])
        assert only and {h.repo for h in only} == {"billing"}
        with pytest.raises(QueryError, match="no repository named nowhere"):
            a.search("charge", repos=["nowhere"])
        # graph questions and status stay within the folder's own repository
        assert a.symbol("charge_credit_card").path == "src/shop/payment.py"
        assert a.status().files == len(SAMPLE_REPO) and b.status().files == 1


def test_rebuild_forgets_one_repository_and_keeps_the_others(tmp_path: Path, team_dsn: str) -> None:
    shop = write_tree(tmp_path / "shop", SAMPLE_REPO)
    other = write_tree(tmp_path / "billing", {"charge.py": "def charge(card):\n    return card\n"})
    fake = FakeEmbedder()
    with _open(shop, embedder=fake) as a, _open(other, embedder=fake) as b:
        a.refresh()
        b.refresh()
    with _open(shop, embedder=fake, rebuild=True) as a:
        assert a.status().files == len(SAMPLE_REPO)  # opening for a rebuild deletes nothing
        assert a.refresh(rebuild=True).files_added == len(SAMPLE_REPO)
        assert a.status().files == len(SAMPLE_REPO)
        assert a.search("charge", k=5, repos=["billing"])[0].path == "charge.py"


class BrokenEmbedder(FakeEmbedder):
    def embed_documents(self, texts):  # noqa: ANN001, ANN201
        raise RuntimeError("embedding failed")


def test_a_failed_rebuild_leaves_the_repository_as_it_was(tmp_path: Path, team_dsn: str) -> None:
    shop = write_tree(tmp_path / "shop", SAMPLE_REPO)
    fake = FakeEmbedder()
    with _open(shop, embedder=fake) as a:
        a.refresh()
    (shop / "extra.py").write_text("def extra():\n    return 1\n")
    with _open(shop, embedder=BrokenEmbedder()) as a, _open(shop, embedder=fake) as reader:
        with pytest.raises(RuntimeError, match="embedding failed"):
            a.refresh(rebuild=True)
        assert reader.status().files == len(SAMPLE_REPO)
        assert reader.search("charge_credit_card", k=1)[0].path == "src/shop/payment.py"
    with _open(shop, embedder=fake) as a:
        assert a.refresh(rebuild=True).files_added == len(SAMPLE_REPO) + 1


def test_every_repository_must_use_the_databases_model(tmp_path: Path, team_dsn: str) -> None:
    with _open(write_tree(tmp_path / "one", SAMPLE_REPO), embedder=FakeEmbedder(dim=32, name="first")) as a:
        a.refresh()
    with _open(write_tree(tmp_path / "two", SAMPLE_REPO), embedder=FakeEmbedder(dim=48, name="second")) as b:
        with pytest.raises(ModelError, match="first"):
            b.refresh()


def test_second_writer_of_a_repository_waits_then_gives_up(tmp_path: Path, team_dsn: str) -> None:
    root = write_tree(tmp_path / "shop", SAMPLE_REPO)
    with _open(root) as first, _open(root) as second:
        first.refresh(vectors=False)
        with first.store.writer_lock(0.0):
            with pytest.raises(IndexBusyError, match="indexing repository 'shop'"):
                second.refresh(wait_seconds=0.2, vectors=False)
            assert second.refresh_if_free(vectors=False) is None  # a search goes on with what is committed
        assert second.refresh(wait_seconds=0.0, vectors=False).files_unchanged == len(SAMPLE_REPO)


def _line_count(path: Path) -> int:
    return path.read_text().count("\n") + 1


def test_parallel_indexers_and_searchers_lose_nothing_and_never_see_half_a_file(
    tmp_path: Path, team_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three indexer processes (two repositories, one of them twice) and four searcher threads
    at once. A reader must see each file whole: its line windows cover it from line 1 to the end."""
    monkeypatch.setenv("CODEWHERE_CHUNKER", "lines")
    body = "".join(f"def function_{j}(value):\n    return value + {j}\n\n" for j in range(60))
    roots = {}
    for name in ("alpha", "beta"):
        roots[name] = write_tree(tmp_path / name, {f"pkg{i % 5}/mod_{i}.py": body for i in range(120)})
    expected_lines = _line_count(roots["alpha"] / "pkg0/mod_0.py")

    errors: list[str] = []
    stop = threading.Event()
    checks = [0]

    def searcher() -> None:
        try:
            with _open(roots["alpha"]) as index:
                while not stop.is_set():
                    spans: dict[tuple[str, str], list[tuple[int, int]]] = {}
                    for repo in index.repositories():
                        for path, start, end in index.store.chunk_spans(Filters(repos=(repo,))):
                            spans.setdefault((repo, path), []).append((start, end))
                    for key, parts in spans.items():
                        parts.sort()
                        if parts[0][0] != 1 or parts[-1][1] < expected_lines - 1:
                            errors.append(f"half-written file {key}: {parts[0]}..{parts[-1]}")
                    index.search("function value", k=5, mode="keyword")
                    checks[0] += 1
                    time.sleep(0.02)  # leave the two cores to the indexers too
        except Exception as exc:  # noqa: BLE001 — the test reports any failure of a reader
            errors.append(f"searcher: {type(exc).__name__}: {exc}")

    readers = [threading.Thread(target=searcher) for _ in range(4)]
    for thread in readers:
        thread.start()
    env = {**os.environ, "CODEWHERE_LOCK_WAIT": "120"}
    writers = [
        subprocess.Popen(
            [sys.executable, "-m", "codewhere", "index", str(roots[name]), "--json"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for name in ("alpha", "beta", "alpha")
    ]
    outputs = [w.communicate(timeout=300) for w in writers]
    time.sleep(0.2)
    stop.set()
    for thread in readers:
        thread.join(timeout=60)
    assert [w.returncode for w in writers] == [0, 0, 0], [err for _, err in outputs]
    assert not errors, errors[:5]
    assert checks[0] > 0
    with _open(roots["alpha"]) as index:
        assert sorted(index.repositories()) == ["alpha", "beta"]
        for name in ("alpha", "beta"):
            spans = index.store.chunk_spans(Filters(repos=(name,)))
            assert len({p for p, _, _ in spans}) == 120  # every file of each repository, once
        assert index.status().files == 120


def test_cli_index_and_search_a_team_database(tmp_path: Path, team_dsn: str, cli) -> None:
    write_tree(tmp_path / "shop", SAMPLE_REPO)
    assert cli("index", str(tmp_path / "shop"), "--repo", "webshop").code == 0
    elsewhere = tmp_path / "laptop"
    elsewhere.mkdir()
    # a reader in any folder searches what the indexer committed, and never writes its own folder
    result = cli("search", "charge credit card", "--repo", "webshop", "-k", "3", cwd=elsewhere)
    assert result.code == 0, result.err
    assert result.out.splitlines()[0].startswith("webshop:src/shop/payment.py:")
    assert cli("search", "charge", "--json", cwd=elsewhere).json()["hits"][0]["repo"] == "webshop"
    status = cli("status", str(tmp_path / "shop"), "--repo", "webshop")
    assert "repository webshop" in status.out and "repositories in this database: webshop" in status.out
    bad = cli("search", "x", "--repo", "nope", cwd=elsewhere)
    assert bad.code == 2 and "no repository named nope" in bad.err and "webshop" in bad.err


def test_unreachable_server_is_one_line_naming_the_setting(tmp_path: Path, monkeypatch, cli) -> None:
    monkeypatch.setenv("CODEWHERE_DSN", "postgresql://someone:secret@127.0.0.1:1/nothing")
    write_tree(tmp_path / "shop", SAMPLE_REPO)
    result = cli("index", str(tmp_path / "shop"))
    assert result.code == 2
    assert "cannot connect to PostgreSQL" in result.err and "CODEWHERE_DSN" in result.err
    assert "secret" not in result.err and len(result.err.strip().splitlines()) == 1


def test_newer_schema_is_refused(tmp_path: Path, team_dsn: str) -> None:
    root = write_tree(tmp_path / "shop", SAMPLE_REPO)
    _open(root).close()
    with psycopg.connect(team_dsn, autocommit=True) as conn:
        conn.execute("UPDATE codewhere.settings SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(IndexFileError, match="newer than this codewhere"):
        _open(root)


def _version_1_database(dsn: str) -> None:
    """A database as codewhere's first schema left it: two repositories, the second ("shop") with
    one file whose chunk, definition, symbol, call edge and vector refer to each other by id."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA codewhere; SET search_path = codewhere, public")
        conn.execute(TEXT_MIGRATIONS[0])
        conn.execute("""
            INSERT INTO settings VALUES ('schema_version', '1'), ('model_id', 'fake'), ('model_dim', '3'),
                                        ('model_fingerprint', 'fake-fake-3');
            ALTER TABLE embeddings ALTER COLUMN embedding TYPE vector(3);
            INSERT INTO repos(name) VALUES ('first'), ('shop');
            INSERT INTO files(repo_id, path, size, mtime_ns, hash, kind, language) VALUES (2, 'old.py', 9, 0, 'h', 'code', 'python');
            INSERT INTO chunks(file_id, repo_id, start_line, end_line, content_hash, text, embed_text, fts)
                VALUES (1, 2, 1, 2, 'c1', 'def pay(): pay()', 'old.py def pay', to_tsvector('simple', 'pay'));
            INSERT INTO definitions VALUES (1, 'pay');
            INSERT INTO embeddings(content_hash, embedding) VALUES ('c1', '[1, 0, 0]');
            INSERT INTO symbols(file_id, repo_id, name, name_key, qualified_name, kind, start_line, end_line, signature,
                                doc, decorators, parent, split, fts)
                VALUES (1, 2, 'pay', 'pay', 'pay', 'function', 1, 2, 'def pay()', '', '', '', 'pay', to_tsvector('simple', 'pay'));
            INSERT INTO edges(file_id, repo_id, kind, source_id, target_name, target_id, resolution, line)
                VALUES (1, 2, 'call', 1, 'pay', 1, 'local', 1);
            INSERT INTO repo_meta VALUES (2, 'chunker_version', 'old');
        """)


def test_a_version_1_database_is_migrated_into_partitions_and_its_files_rewritten(tmp_path: Path, team_dsn: str) -> None:
    """Every migration in turn: version 2 onwards add columns and forget the chunker version (the
    next refresh rewrites every file); version 7 moves each repository's rows into partitions of
    its own, their ids into its range, references with them."""
    _version_1_database(team_dsn)
    root = write_tree(tmp_path / "shop", SAMPLE_REPO)
    with _open(root, embedder=FakeEmbedder(dim=3)) as index:
        with psycopg.connect(team_dsn, autocommit=True) as conn:
            conn.execute("SET search_path = codewhere")
            assert conn.execute("SELECT value FROM settings WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
            assert conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'chunks'::regclass").fetchone()[0] == 2
            shifted = (2 << REPO_ID_SHIFT) | 1
            assert conn.execute("SELECT repo_id, id, file_id FROM chunks").fetchall() == [(2, shifted, shifted)]
            assert conn.execute("SELECT repo_id, chunk_id, file_id FROM definitions").fetchall() == [(2, shifted, shifted)]
            assert conn.execute("SELECT e.source_id = s.id AND e.target_id = s.id AND s.file_id = %s FROM edges e, symbols s",
                                (shifted,)).fetchone() == (True,)
            assert conn.execute("SELECT repo_id, content_hash FROM embeddings").fetchall() == [(2, "c1")]
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'codewhere' AND tablename LIKE '%_v6'").fetchone()[0] == 0
        assert index.callers("pay")[1]  # the graph reads the moved rows
        report = index.refresh()
        assert report.files_added == report.files_kept == len(SAMPLE_REPO)  # every file written again
        assert "old.py" not in index.store.file_states()
        assert index.search("charge_credit_card", k=1)[0].path == "src/shop/payment.py"


def test_the_live_schema_is_ready_to_shard(tmp_path: Path, team_dsn: str) -> None:
    """What a distributed database (Citus) needs of a table distributed by repository: each table
    that grows with code partitioned by `repo_id`, every primary key and unique index starting
    with it, and no row id from a sequence."""
    with _open(write_tree(tmp_path / "shop", SAMPLE_REPO), embedder=FakeEmbedder()) as index:
        index.refresh()
    with psycopg.connect(team_dsn, autocommit=True) as conn:
        partitioned = dict(conn.execute(
            """SELECT c.relname, pg_get_partkeydef(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'codewhere' AND c.relkind = 'p'""").fetchall())
        assert partitioned == dict.fromkeys(PARTITIONED, "LIST (repo_id)")
        unique = conn.execute(
            """SELECT t.relname, i.relname, a.attname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
               JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
               JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
               WHERE n.nspname = 'codewhere' AND x.indisunique""").fetchall()
        keyed_otherwise = [(t, i, first) for t, i, first in unique if first != "repo_id" and t not in ("repos", "settings")]
        assert unique and keyed_otherwise == []
        defaults = conn.execute(
            """SELECT c.relname, a.attname FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid
               JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.adnum
               WHERE n.nspname = 'codewhere' AND pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval%%' AND c.relname <> 'repos'""").fetchall()
        assert defaults == []
        missing_key = conn.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'codewhere' AND c.relkind IN ('r', 'p') AND c.relname NOT IN ('repos', 'settings')
                 AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'repo_id')""").fetchall()
        assert missing_key == []


def _scans(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {name: int(n) for name, n in conn.execute(
            """SELECT relname, coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables
               WHERE schemaname = 'codewhere' AND relname ~ '_r[0-9]+$'""")}


def _shop_and_billing(tmp_path: Path) -> tuple[Index, Index]:
    """Two repositories in one database, both indexed: the shop and a one-file billing service."""
    fake = FakeEmbedder()
    shop = _open(write_tree(tmp_path / "shop", SAMPLE_REPO), embedder=fake)
    billing = _open(write_tree(tmp_path / "billing", {"charge.py": "def charge(card):\n    return card\n"}), embedder=fake)
    shop.refresh()
    billing.refresh()
    return shop, billing


def test_a_search_scoped_to_one_repository_reads_only_its_partitions(tmp_path: Path, team_dsn: str) -> None:
    a, b = _shop_and_billing(tmp_path)
    with a, b:
        billing = b.store._repo_id  # noqa: SLF001
        a.store._db.execute("SELECT pg_stat_force_next_flush()")  # noqa: SLF001
        before = _scans(team_dsn)
        hits = a.search("charge card", k=5, repos=["shop"])
        a.store._db.execute("SELECT pg_stat_force_next_flush()")  # noqa: SLF001
        after = _scans(team_dsn)
    assert hits and all(h.repo == "shop" for h in hits)
    touched = {name for name, n in after.items() if n > before.get(name, 0)}
    assert any(name.startswith("chunks_r") for name in touched)
    assert not {name for name in touched if name.endswith(f"_r{billing}")}


def test_dropping_a_repository_drops_its_partitions_and_keeps_the_others(tmp_path: Path, team_dsn: str) -> None:
    a, b = _shop_and_billing(tmp_path)
    with a, b:
        billing = b.store._repo_id  # noqa: SLF001
        assert b.store.drop_repository() and not b.store.drop_repository()
        assert a.repositories() == ["shop"]
        assert a.search("charge_credit_card", k=1)[0].path == "src/shop/payment.py"
    with psycopg.connect(team_dsn, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'codewhere' AND tablename LIKE %s",
                            (f"%\\_r{billing}",)).fetchone()[0]
    assert left == 0


def test_the_schema_lives_in_its_own_namespace(tmp_path: Path, team_dsn: str) -> None:
    with psycopg.connect(team_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.files(id int)")  # someone else's table of the same name
    with _open(write_tree(tmp_path / "shop", SAMPLE_REPO)) as index:
        index.refresh(vectors=False)
    with psycopg.connect(team_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM public.files").fetchone()[0] == 0


def test_tsquery_text_quotes_user_text() -> None:
    assert tsquery_text(TermQuery(("send", "o'brien"))) == "'send' | 'o' | 'brien'"
    assert tsquery_text(TermQuery(("parse", "config"), "phrase")) == "'parse' <-> 'config'"
    assert tsquery_text(TermQuery(("!!",))) == ""


def test_redact_dsn() -> None:
    assert redact_dsn("postgresql://me:hunter2@db:5432/code") == "postgresql://me:***@db:5432/code"
    assert redact_dsn("host=db password=hunter2 dbname=code") == "host=db password=*** dbname=code"


def test_mcp_hits_from_a_shared_index_name_their_repository() -> None:
    from codewhere.output import hit as _hit
    from codewhere.types import FileKind, Hit

    hit = Hit("src/app.py", 3, 9, 0.5, FileKind.CODE, "python", "def main():", {}, "webshop")
    assert _hit(hit)["location"] == "webshop:src/app.py:3-9" and _hit(hit)["repo"] == "webshop"
    assert _hit(Hit("a.py", 1, 2, 0.1, FileKind.CODE, "python", ""))["location"] == "a.py:1-2"


def test_a_reader_whose_connection_drops_reconnects_and_a_writer_gets_one_line(tmp_path: Path, team_dsn: str) -> None:
    with _open(write_tree(tmp_path / "shop", SAMPLE_REPO), embedder=FakeEmbedder()) as index:
        index.refresh()  # the store now works on the primary as a writer: it never reconnects silently
        pid = index.store._db.info.backend_pid  # noqa: SLF001 — the test plays the server's side
        with psycopg.connect(team_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(IndexFileError, match="lost the connection to PostgreSQL") as info:
            index.search("charge credit card")
        assert "check that the server is up" in info.value.hint
    with _open(tmp_path / "shop", embedder=FakeEmbedder()) as reader:
        assert reader.search("charge credit card", k=1)
        with psycopg.connect(team_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (reader.store._db.info.backend_pid,))  # noqa: SLF001
        assert reader.search("charge credit card", k=1)[0].path == "src/shop/payment.py"  # on a new connection


def test_searchers_only_read_so_they_can_use_a_read_only_replica(tmp_path: Path, team_dsn: str) -> None:
    root = write_tree(tmp_path / "shop", SAMPLE_REPO)
    with _open(root, embedder=FakeEmbedder()) as index:
        index.refresh()
    database = psycopg.conninfo.conninfo_to_dict(team_dsn)["dbname"]
    with psycopg.connect(team_dsn, autocommit=True) as admin:  # every new session is read-only, as on a standby
        admin.execute(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
    with _open(root, embedder=FakeEmbedder()) as reader:
        assert reader.search("charge credit card", k=3)[0].path == "src/shop/payment.py"
        assert reader.callers("gateway_request")[1]
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            reader.store.set_meta({"x": "y"})


def test_missing_psycopg_is_one_line_naming_the_extra(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "codewhere.store.postgres", None)  # as if psycopg could not be imported
    monkeypatch.setenv("CODEWHERE_DSN", "postgresql://db/code")
    with pytest.raises(IndexFileError, match="needs psycopg") as info:
        _open(write_tree(tmp_path / "shop", SAMPLE_REPO))
    assert info.value.hint == "pip install 'codewhere[postgres]'"


def test_a_nul_byte_past_the_binary_sniff_is_stored(tmp_path: Path, team_dsn: str) -> None:
    """PostgreSQL's text refuses NUL; a text file can hold one after the bytes the scanner reads
    to tell text from binary (found indexing PyPI sdists)."""
    body = "def padding():\n    return 1\n" * 1200 + 'def tail_with_nul():\n    return "a\x00b"\n'
    root = write_tree(tmp_path / "shop", {"late_nul.py": body})
    with _open(root, embedder=FakeEmbedder()) as index:
        index.refresh()
        hit = index.search("tail_with_nul", k=1)[0]
    assert hit.path == "late_nul.py" and hit.start_line == 2401


def test_a_server_refusal_is_one_line_with_the_servers_hint(tmp_path: Path, team_dsn: str, monkeypatch) -> None:
    """An error the server answers with (out of lock slots, out of memory) is not a lost
    connection: no reconnect, its own line and the server's hint."""
    with _open(write_tree(tmp_path / "shop", SAMPLE_REPO), embedder=FakeEmbedder()) as index:
        index.refresh()
        db = index.store._db  # noqa: SLF001

        def out_of_lock_slots(*args: object, **kwargs: object) -> object:
            return psycopg.Connection.execute(db, """DO $$ BEGIN RAISE EXCEPTION 'out of shared memory'
                USING ERRCODE = '53200', HINT = 'You might need to increase "max_locks_per_transaction".'; END $$""")

        monkeypatch.setattr(db, "execute", out_of_lock_slots)
        with pytest.raises(IndexFileError, match="refused: out of shared memory") as info:
            index.repositories()
        assert "max_locks_per_transaction" in info.value.hint and not db.closed


def test_the_read_dsn_is_a_setting_and_its_password_is_never_printed(monkeypatch) -> None:
    monkeypatch.setenv("CODEWHERE_READ_DSN", "postgresql://reader:hunter2@r1,r2/code?target_session_attrs=prefer-standby")
    rows = {key: (env, value) for key, env, value, _ in Settings.from_env().effective()}
    env, shown = rows["index.read_dsn"]
    assert env == "CODEWHERE_READ_DSN" and "hunter2" not in str(shown) and "r1,r2/code" in str(shown)


def test_cli_drops_one_repository_and_keeps_the_others(tmp_path: Path, team_dsn: str, cli) -> None:
    write_tree(tmp_path / "shop", SAMPLE_REPO)
    write_tree(tmp_path / "billing", {"charge.py": "def charge(card):\n    return card\n"})
    assert cli("index", str(tmp_path / "shop")).code == 0
    assert cli("index", str(tmp_path / "billing")).code == 0
    dropped = cli("index", str(tmp_path / "billing"), "--drop")
    assert dropped.code == 0 and "dropped repository billing" in dropped.out
    assert cli("index", str(tmp_path / "billing"), "--drop", "--json").json() == {"repository": "billing", "dropped": False}
    gone = cli("search", "charge", "--repo", "billing", cwd=tmp_path)
    assert gone.code == 2 and "no repository named billing" in gone.err and "shop" in gone.err
    assert cli("search", "charge_credit_card", "--repo", "shop", "-k", "1", cwd=tmp_path).out.startswith("shop:src/shop/payment.py:")


def test_cli_drop_of_a_folders_own_index_is_one_line(tmp_path: Path, cli, monkeypatch) -> None:
    monkeypatch.delenv("CODEWHERE_DSN", raising=False)
    root = write_tree(tmp_path / "shop", SAMPLE_REPO)
    assert cli("index", str(root)).code == 0
    refused = cli("index", str(root), "--drop")
    assert refused.code == 2 and "shared (PostgreSQL) index" in refused.err and "delete" in refused.err
    assert len(refused.err.strip().splitlines()) == 1


WEATHER = {"forecast.py": "def forecast_rain(city):\n    \"\"\"Tomorrow's rain forecast for a city.\"\"\"\n    return radar(city)\n"}


def _three_repositories(tmp_path: Path) -> tuple[Index, Index, Index]:
    """The shop, billing and a weather service in one database, all indexed."""
    shop, billing = _shop_and_billing(tmp_path)
    weather = _open(write_tree(tmp_path / "weather", WEATHER), embedder=FakeEmbedder())
    weather.refresh()
    return shop, billing, weather


def test_a_search_across_many_repositories_reads_those_its_words_point_to(tmp_path: Path, team_dsn: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEWHERE_ROUTE_REPOSITORIES", "1")
    a, b, c = _three_repositories(tmp_path)
    with a, b, c:
        weather = c.store._repo_id  # noqa: SLF001
        a.store._db.execute("SELECT pg_stat_force_next_flush()")  # noqa: SLF001
        before = _scans(team_dsn)
        hits = a.search("rain forecast for tomorrow", k=5)
        a.store._db.execute("SELECT pg_stat_force_next_flush()")  # noqa: SLF001
        touched = {name for name, n in _scans(team_dsn).items() if n > before.get(name, 0)}
        assert a.routed() is not None and a.routed().names == ("weather",) and a.routed().among == 3
        assert hits and {h.repo for h in hits} == {"weather"}
        assert touched and all(name.endswith(f"_r{weather}") for name in touched)  # no other repository's partitions
        assert "searched the 1 of 3 repositories" in a.routed().line() and "weather" in a.routed().line()
        # every repository when asked, or when no repository holds a word of the question
        assert {h.repo for h in a.run(SearchRequest("charge card", k=20, all_repos=True))} >= {"shop", "billing"}
        assert a.routed() is None
        a.search("zyzzogeton", k=5)
        assert a.routed() is None
        # a refresh counts its repository's words again: billing now holds the words, and the
        # shop, whose payment file goes, no longer holds "gateway"
        (tmp_path / "billing" / "rain.py").write_text("def rain_forecast_fee(city):\n    return forecast_rain(city)\n")
        b.refresh()
        monkeypatch.setenv("CODEWHERE_ROUTE_REPOSITORIES", "2")
        with _open(tmp_path / "shop", embedder=FakeEmbedder()) as wider:
            wider.search("rain forecast", k=5)
            assert set(wider.routed().names) == {"weather", "billing"}
            (tmp_path / "shop" / "src/shop/payment.py").unlink()
            wider.refresh(vectors=False)
            wider.search("gateway", k=5)
            assert wider.routed() is None  # no repository holds it now
        assert c.store.drop_repository()
    with psycopg.connect(team_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM codewhere.repo_words WHERE repo_id = %s", (weather,)).fetchone()[0] == 0


def test_a_version_7_database_gets_each_repositorys_words(tmp_path: Path, team_dsn: str) -> None:
    a, b = _shop_and_billing(tmp_path)
    a.close()
    b.close()
    with psycopg.connect(team_dsn, autocommit=True) as conn:
        conn.execute("SET search_path = codewhere")
        conn.execute("DROP TABLE repo_words")
        conn.execute("ALTER TABLE repos DROP COLUMN file_count")
        conn.execute("UPDATE settings SET value = '7' WHERE key = 'schema_version'")
    with _open(tmp_path / "shop", embedder=FakeEmbedder()):
        pass
    with psycopg.connect(team_dsn, autocommit=True) as conn:
        conn.execute("SET search_path = codewhere")
        assert conn.execute("SELECT value FROM settings WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        counts = dict(conn.execute("SELECT name, file_count FROM repos").fetchall())
        assert counts == {"shop": len(SAMPLE_REPO), "billing": 1}
        held = dict(conn.execute("""SELECT w.word, w.files FROM repo_words w JOIN repos r ON r.id = w.repo_id
                                    WHERE r.name = 'shop' AND w.word IN ('charge', 'cart')""").fetchall())
        assert held["charge"] >= 1 and held["cart"] >= 1


@pytest.fixture
def routed_to_one(tmp_path: Path, team_dsn: str, cli, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: ANN001
    """The shop and the weather service indexed by the CLI into one database, searches routed to one
    repository; the folder holding both."""
    monkeypatch.setenv("CODEWHERE_ROUTE_REPOSITORIES", "1")
    for name, tree in (("shop", SAMPLE_REPO), ("weather", WEATHER)):
        write_tree(tmp_path / name, tree)
        assert cli("index", str(tmp_path / name)).code == 0
    return tmp_path


def test_cli_says_which_repositories_a_search_across_them_read(routed_to_one: Path, cli) -> None:  # noqa: ANN001
    tmp_path = routed_to_one
    routed = cli("search", "rain forecast", cwd=tmp_path)
    assert routed.code == 0 and routed.out.startswith("weather:forecast.py:")
    assert "searched the 1 of 2 repositories" in routed.err and "--all-repos" in routed.err
    assert cli("search", "rain forecast", "--json", cwd=tmp_path).json()["repositories"] == {"searched": ["weather"], "of": 2}
    every = cli("search", "rain forecast", "--all-repos", "--json", cwd=tmp_path).json()
    assert "repositories" not in every


def test_an_agent_is_told_which_repositories_a_search_across_them_read(routed_to_one: Path) -> None:
    import anyio

    from tests.test_mcp import payload, session_run

    answers: dict[str, object] = {}

    async def body(session) -> None:  # noqa: ANN001
        answers["search"] = payload(await session.call_tool("search", {"query": "rain forecast", "k": 3}))

    anyio.run(session_run, routed_to_one / "shop", body)
    found = answers["search"]
    assert isinstance(found, dict) and found["repositories"] == {"searched": ["weather"], "of": 2}
    assert found["hits"] and all(h["location"].startswith("weather:") for h in found["hits"])
