"""The real server as a subprocess, driven by the official SDK's client over stdio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from codewhere.agent_answer import compact, search_answer, tokens
from codewhere.redact import redact
from codewhere.types import FileKind, Hit
from tests.conftest import SAMPLE_REPO, write_tree

TOOLS = {"search", "find_related", "outline", "symbols", "definition", "graph", "index_status", "refresh"}


def payload(result) -> object:  # noqa: ANN001
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def session_run(root: Path, body) -> None:  # noqa: ANN001
    params = StdioServerParameters(command=sys.executable, args=["-m", "codewhere", "mcp", str(root)], env=dict(os.environ))
    async with stdio_client(params) as streams:
        async with ClientSession(*streams) as session:
            await session.initialize()
            await body(session)


def test_tools_over_stdio(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", {**SAMPLE_REPO, ".env.example": "API_KEY = 'abcd1234efgh5678'\n"})
    (tmp_path / "outside.py").write_text("secret = 1\n")

    async def body(session: ClientSession) -> None:
        tools = await session.list_tools()
        assert {t.name for t in tools.tools} == TOOLS
        assert all(t.description and len(t.description) > 30 for t in tools.tools)
        # answers are compact JSON text, once: no output schema, no structured copy of the same answer
        assert not any(t.output_schema for t in tools.tools)
        raw = await session.call_tool("search", {"query": "charge_credit_card"})
        assert raw.structured_content is None and "\n  " not in raw.content[0].text
        found = payload(raw)
        assert found["hits"][0]["location"] == "src/shop/payment.py:2-6"
        assert "2 def charge_credit_card" in found["hits"][0]["snippet"]  # numbered lines
        assert "why" not in found["hits"][0]
        explained = payload(await session.call_tool("search", {"query": "charge_credit_card", "explain": True}))
        assert explained["hits"][0]["why"]
        bare = payload(await session.call_tool("search", {"query": "charge_credit_card", "max_lines": 0}))
        assert "snippet" not in bare["hits"][0]
        code_only = payload(await session.call_tool("search", {"query": "charge_credit_card", "kinds": ["code"]}))
        assert {h.get("kind", "code") for h in code_only["hits"]} == {"code"}  # code is the kind left unsaid
        outline = payload(await session.call_tool("outline", {"path": "src/shop/cart.py"}))["symbols"]
        assert [s["qualified_name"] for s in outline] == ["Cart", "Cart.__init__", "Cart.add_item", "Cart.total_price"]
        callers = payload(await session.call_tool("graph", {"question": "callers", "name": "gateway_request"}))
        assert {c["from"]["qualified_name"] for c in callers["references"]} == {"charge_credit_card", "refund_payment"}
        callees = payload(await session.call_tool("graph", {"question": "callees", "name": "refund_payment"}))
        assert [c["to"]["qualified_name"] for c in callees["references"]] == ["gateway_request"]
        impact = payload(await session.call_tool("graph", {"question": "impact", "name": "gateway_request", "depth": 2}))["impact"]
        assert impact and all(i["weakest"] == "same-file" for i in impact if i["distance"] == 1)
        # the callers are guesses by name within the file: none is at least as sure as an import
        sure = payload(await session.call_tool("graph", {"question": "callers", "name": "gateway_request", "min_confidence": "import"}))
        assert sure["references"] == [] and {c["resolution"] for c in callers["references"]} == {"same-file"}
        unknown = await session.call_tool("graph", {"question": "callers", "name": "gateway_request", "min_confidence": "certain"})
        assert unknown.is_error and "unknown confidence level" in unknown.content[0].text
        odd = await session.call_tool("graph", {"question": "friends", "name": "gateway_request"})
        assert odd.is_error and "unknown question 'friends'" in odd.content[0].text and "callers" in odd.content[0].text
        # read one definition without opening its file: its lines, cut to max_lines and said so
        whole = payload(await session.call_tool("definition", {"name": "refund_payment"}))
        assert whole["location"].startswith("src/shop/payment.py:") and whole["code"].lstrip().startswith("def refund_payment")
        first, _, last = whole["location"].rpartition(":")[2].partition("-")
        assert len(whole["code"].split("\n")) == int(last) - int(first) + 1 and "cut" not in whole
        one = payload(await session.call_tool("definition", {"name": "refund_payment", "max_lines": 1}))
        assert "\n" not in one["code"] and "more lines" in one["cut"]
        nothing = await session.call_tool("definition", {"name": "no_such_symbol_anywhere"})
        assert nothing.is_error
        assert payload(await session.call_tool("graph", {"question": "refs", "name": "gateway_request"}))["references"]
        assert payload(await session.call_tool("symbols", {"query": "credit card"}))["symbols"][0]["name"] == "charge_credit_card"
        related = payload(await session.call_tool("find_related", {"path": "src/shop/payment.py", "line": 3}))
        assert related["hits"] and all(not h["location"].startswith("src/shop/payment.py:2-") for h in related["hits"])
        status = payload(await session.call_tool("index_status", {}))
        assert status["files"] == 9 and status["model"] == "default"
        # path escapes are refused
        for bad in ("../outside.py", str(tmp_path / "outside.py"), "src/../../outside.py"):
            result = await session.call_tool("outline", {"path": bad})
            assert result.is_error and "outside the served folders" in result.content[0].text
        os.symlink(tmp_path / "outside.py", root / "link.py")
        escaped = await session.call_tool("outline", {"path": "link.py"})
        assert escaped.is_error
        # secrets are redacted in snippets
        secret = payload(await session.call_tool("search", {"query": "API_KEY", "mode": "keyword"}))
        assert "abcd1234efgh5678" not in json.dumps(secret) and "[REDACTED]" in json.dumps(secret)
        # an edit between two calls is seen by the second
        (root / "src/shop/cart.py").write_text("def brand_new_function():\n    pass\n")
        after = payload(await session.call_tool("outline", {"path": "src/shop/cart.py"}))["symbols"]
        assert [s["qualified_name"] for s in after] == ["brand_new_function"]
        missing = await session.call_tool("graph", {"question": "callers", "name": "no_such_symbol_anywhere"})
        assert missing.is_error and "no symbol" in missing.content[0].text

    anyio.run(session_run, root, body)


def test_the_cli_and_the_mcp_tools_answer_alike(tmp_path: Path, cli) -> None:  # noqa: ANN001
    """The same hits in the same order; an agent's search answer is the compact form (one location,
    no `why` unless asked), and a graph answer is the CLI's JSON."""
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    from_cli = cli("search", "charge_credit_card", str(root), "--json", "-k", "3").json()
    callers_cli = cli("callers", "gateway_request", str(root), "--json").json()
    answers: dict[str, dict] = {}

    async def body(session: ClientSession) -> None:
        answers["search"] = payload(await session.call_tool("search", {"query": "charge_credit_card", "k": 3}))
        answers["callers"] = payload(await session.call_tool("graph", {"question": "callers", "name": "gateway_request"}))

    anyio.run(session_run, root, body)
    assert [h["location"] for h in answers["search"]["hits"]] == [h["location"] for h in from_cli["hits"]]
    assert [h.get("symbol", "") for h in answers["search"]["hits"]] == [h["symbol"] for h in from_cli["hits"]]
    assert answers["callers"] == callers_cli


def test_first_index_reports_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # one process, so a "vectors" phase exists: with workers the static model embeds in them
    monkeypatch.setenv("CODEWHERE_WORKERS", "1")
    root = write_tree(tmp_path / "big", {f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(450)})
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def body(session: ClientSession) -> None:
        found = payload(await session.call_tool("search", {"query": "f7"}, progress_callback=on_progress))
        assert found["hits"]

    anyio.run(session_run, root, body)
    files = [(p, t) for p, t, m in seen if m and m.startswith("indexing pkg/")]
    vectors = [(p, t) for p, t, m in seen if m == "embedding chunks"]
    assert files == [(200, 450), (400, 450)]  # every 200 files, of the total the scan found
    assert vectors == [(256, 450), (450, 450)]  # each page of chunks embedded, of those without a vector
    assert len(files) + len(vectors) == len(seen)


def test_budget_trims_snippets_before_dropping_hits() -> None:
    hits = [Hit(f"f{i}.py", 1, 40, 1.0, FileKind.CODE, "python", "\n".join(["x" * 80] * 12), snippet_line=1) for i in range(30)]
    roomy = search_answer(hits, lambda path: None, 10, 20_000, False, True)
    assert len(roomy["hits"]) == 30 and "trimmed" not in roomy  # type: ignore[arg-type]
    assert all(h["snippet"].count("\n") == 9 for h in roomy["hits"])  # type: ignore[union-attr, index]
    tight = search_answer(hits, lambda path: None, 10, 1_000, False, True)
    assert "trimmed" in tight and all(h.get("snippet", "").count("\n") <= 3 for h in tight["hits"])  # type: ignore[union-attr]
    assert tokens(compact(tight)) <= 1_000 + 30
    tiny = search_answer(hits, lambda path: None, 10, 100, False, True)
    assert 0 < len(tiny["hits"]) < 30 and "dropped" in str(tiny["trimmed"])  # type: ignore[arg-type]


def test_tools_list_and_instructions_fit_1500_tokens(tmp_path: Path) -> None:
    """Issue 51: the tool list cost 6,173 tokens, most of it output schemas."""
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    sizes: dict[str, int] = {}

    async def body(session: ClientSession) -> None:
        tools = await session.list_tools()
        listing = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools]
        sizes["tools"] = tokens(compact(listing))

    params = StdioServerParameters(command=sys.executable, args=["-m", "codewhere", "mcp", str(root)], env=dict(os.environ))

    async def run() -> None:
        async with stdio_client(params) as streams:
            async with ClientSession(*streams) as session:
                started = await session.initialize()
                sizes["instructions"] = tokens(started.instructions or "")
                await body(session)

    anyio.run(run)
    assert sizes["tools"] + sizes["instructions"] <= 1_300, sizes  # 1,211 with eight tools (the target: 1,500)


@pytest.mark.parametrize("secret", [
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    "AKIAABCDEFGHIJKLMNOP", "ghp_" + "a" * 36, "xoxb-1234567890-abcdef", "sk-" + "b" * 32,
])
def test_redaction(secret: str) -> None:
    assert "[REDACTED]" in redact(f"value = {secret}\n") and secret not in redact(f"value = {secret}\n")


def test_print_config(cli, tmp_path: Path) -> None:
    claude = json.loads(cli("mcp", "--print-config", "claude", str(tmp_path)).out)
    assert claude["mcpServers"]["codewhere"]["args"] == ["mcp", str(tmp_path.resolve())]
    assert "[mcp_servers.codewhere]" in cli("mcp", "--print-config", "codex", str(tmp_path)).out
    assert json.loads(cli("mcp", "--print-config", "vscode", str(tmp_path)).out)["servers"]["codewhere"]["type"] == "stdio"


def test_the_server_watches_its_folder_and_answers_without_walking_it(tmp_path: Path) -> None:
    import subprocess
    import time

    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)

    async def body(session: ClientSession) -> None:
        assert payload(await session.call_tool("search", {"query": "charge_credit_card"}))["hits"]
        status = payload(await session.call_tool("index_status", {}))
        assert status["watch"] == "watching" and status["git"]["branch"] == "main"
        (root / "src/shop/loyalty.py").write_text("def award_loyalty_points(user):\n    return 10\n")
        end = time.monotonic() + 20
        while True:  # the watcher applies it beside the answers: poll, with a deadline
            hits = payload(await session.call_tool("search", {"query": "award_loyalty_points", "mode": "keyword"}))["hits"]
            if hits and hits[0]["location"].startswith("src/shop/loyalty.py:"):
                break
            assert time.monotonic() < end, "the saved file was not searchable within 20 s"
            await anyio.sleep(0.05)

    anyio.run(session_run, root, body)


def _files(*folders: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for folder in folders for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("agent", ["claude", "cursor", "vscode", "codex"])
def test_install_connects_an_agent_keeping_what_was_there_and_uninstall_removes_only_ours(
        tmp_path: Path, agent: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    from codewhere import install
    from tests.conftest import run_cli

    root = write_tree(tmp_path / "repo", {**SAMPLE_REPO, "CLAUDE.md": "# Our rules\n", "AGENTS.md": "Be brief.\n"})
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}, indent=2) + "\n")
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('model = "o4"\n\n[mcp_servers.other]\ncommand = "x"\n')
    monkeypatch.setenv("HOME", str(home))  # codex's file is the user's: ~/.codex/config.toml
    before = _files(root, home)
    shown = run_cli("install", "--agent", agent, str(root), "--print")
    assert shown.code == 0 and "would write" in shown.out
    assert _files(root, home) == before  # --print writes nothing
    done = run_cli("install", "--agent", agent, str(root), "--json")
    assert done.code == 0, done.err
    entry_file, instructions = (Path(f["path"]) for f in done.json()["files"])
    if agent == "codex":
        config = tomllib.loads(entry_file.read_text())
        assert config["model"] == "o4" and "other" in config["mcp_servers"]
        server = config["mcp_servers"]["codewhere"]
    else:
        servers = json.loads(entry_file.read_text())["servers" if agent == "vscode" else "mcpServers"]
        server = servers["codewhere"]
        assert agent != "claude" or "other" in servers  # another server's entry is kept
    assert server["args"] == ["mcp", str(root.resolve())]
    assert install.BEGIN in instructions.read_text() and "`search`" in instructions.read_text()
    again = run_cli("install", "--agent", agent, str(root))
    assert again.code == 0 and "nothing to write" in again.out  # a second install changes nothing
    removed = run_cli("install", "--agent", agent, str(root), "--uninstall")
    assert removed.code == 0, removed.err
    assert _files(root, home) == before  # exactly what was there before, byte for byte


def test_a_first_call_during_the_first_index_answers_from_what_is_committed(tmp_path: Path) -> None:
    """Issue 51: Django's first search waited 76 s for the whole first index."""
    import time

    root = write_tree(tmp_path / "big", {f"pkg{i // 500}/mod_{i}.py": "".join(
        f"def handler_{i}_{j}(request):\n    return request.send({j})\n\n" for j in range(10)) for i in range(3000)})
    timings: dict[str, float] = {}

    async def body(session: ClientSession) -> None:
        started = time.monotonic()
        first = payload(await session.call_tool("search", {"query": "handler_0_3", "mode": "keyword"}))
        timings["first"] = time.monotonic() - started
        assert "catching up" in first.get("index", ""), first  # says it is partial
        while "index" in (later := payload(await session.call_tool("search", {"query": "handler_2999_3", "mode": "keyword"}))):
            await anyio.sleep(1)
        assert later["hits"][0]["location"].startswith("pkg5/mod_2999.py:")

    anyio.run(session_run, root, body)
    assert timings["first"] < 15, timings
