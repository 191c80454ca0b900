"""`codewhere install --agent CLIENT`: connect a coding agent in one command.

Each client keeps its MCP servers in a file of its own, documented by the client; this writes
the `codewhere` entry there (keeping every other entry), and a short instruction in the file the
client reads its project instructions from, between markers so `--uninstall` removes exactly
what was written. Project files are written in the repository's root.

| client | MCP entry | instructions |
|---|---|---|
| claude (Claude Code) | `.mcp.json`, `mcpServers` | `CLAUDE.md` |
| cursor | `.cursor/mcp.json`, `mcpServers` | `.cursor/rules/codewhere.mdc` |
| vscode (Copilot) | `.vscode/mcp.json`, `servers` | `.github/copilot-instructions.md` |
| codex | `~/.codex/config.toml`, `[mcp_servers.codewhere]` | `AGENTS.md` |
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from codewhere.errors import QueryError

AGENTS = ("claude", "cursor", "vscode", "codex")
BEGIN, END = "<!-- codewhere:begin -->", "<!-- codewhere:end -->"
INSTRUCTIONS = """\
Use the `codewhere` MCP tools before grep or reading whole files: `search` takes a question in
plain words ("where do we retry failed uploads") or an identifier and answers `path:start-end` of
whole definitions with their first lines; `definition` reads one by name; `graph` answers who
calls or uses what (callers, callees, refs, impact); `outline` shows a file's definitions. Read
only the lines a hit names."""


@dataclass(frozen=True)
class Change:
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None  # None: the file is removed (it held nothing else)


def _command() -> str:
    """The `codewhere` this process runs as, absolute when it can be, so the client finds it."""
    launched = Path(sys.argv[0])
    return str(launched.resolve()) if launched.name == "codewhere" and launched.exists() else "codewhere"


def plan(agent: str, root: Path, home: Path, uninstall: bool = False) -> list[Change]:
    """The files to write for `agent` on `root`, as (path, before, after)."""
    if agent not in AGENTS:
        raise QueryError(f"unknown agent {agent!r}", f"use one of: {', '.join(AGENTS)}")
    entry: dict[str, object] = {"command": _command(), "args": ["mcp", str(root)]}
    if agent == "codex":
        config = home / ".codex" / "config.toml"
        changes = [Change(config, _read(config), _toml_entry(_read(config), None if uninstall else entry))]
        instructions = root / "AGENTS.md"
    else:
        file, key = {"claude": (root / ".mcp.json", "mcpServers"), "cursor": (root / ".cursor" / "mcp.json", "mcpServers"),
                     "vscode": (root / ".vscode" / "mcp.json", "servers")}[agent]
        value = {"type": "stdio", **entry} if agent == "vscode" else entry
        changes = [Change(file, _read(file), _json_entry(file, _read(file), key, None if uninstall else value))]
        instructions = {"claude": root / "CLAUDE.md", "cursor": root / ".cursor" / "rules" / "codewhere.mdc",
                        "vscode": root / ".github" / "copilot-instructions.md"}[agent]
    before = _read(instructions)
    changes.append(Change(instructions, before, _marked(before, None if uninstall else INSTRUCTIONS)))
    return [c for c in changes if c.before != c.after]


def apply(changes: list[Change]) -> None:
    for change in changes:
        if change.after is None:
            change.path.unlink(missing_ok=True)
        else:
            change.path.parent.mkdir(parents=True, exist_ok=True)
            change.path.write_text(change.after, encoding="utf-8")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise QueryError(f"cannot read {path} ({exc.strerror})", "check its permissions") from exc


def _json_entry(path: Path, text: str | None, key: str, value: dict[str, object] | None) -> str | None:
    try:
        data = json.loads(text) if text and text.strip() else {}
    except json.JSONDecodeError as exc:
        raise QueryError(f"{path} is not valid JSON (line {exc.lineno})", "fix it, or move it aside and run again") from exc
    if not isinstance(data, dict):
        raise QueryError(f"{path} does not hold a JSON object", "fix it, or move it aside and run again")
    if value is None:
        if text is None:
            return None
        servers = data.get(key, {})
        servers.pop("codewhere", None)
        if not servers:
            data.pop(key, None)
        return json.dumps(data, indent=2) + "\n" if data else None  # a file that held only our entry goes
    data.setdefault(key, {})["codewhere"] = value
    return json.dumps(data, indent=2) + "\n"


_TOML_TABLE = re.compile(r"^\[mcp_servers\.codewhere\]\n(?:(?!\[).*\n?)*", re.MULTILINE)


def _toml_entry(text: str | None, entry: dict[str, object] | None) -> str | None:
    kept = _TOML_TABLE.sub("", text or "").rstrip("\n")
    if entry is None:
        return kept + "\n" if kept else None
    args = ", ".join(json.dumps(a) for a in entry["args"])  # type: ignore[attr-defined]
    table = f"[mcp_servers.codewhere]\ncommand = {json.dumps(entry['command'])}\nargs = [{args}]\n"
    return (kept + "\n\n" if kept else "") + table


def _marked(text: str | None, block: str | None) -> str | None:
    """`text` with codewhere's marked block replaced by `block` (or removed when None)."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n?", re.DOTALL)
    kept = pattern.sub("", text or "").rstrip("\n")
    if block is None:
        return (kept + "\n") if kept else None
    return (kept + "\n\n" if kept else "") + f"{BEGIN}\n{block}\n{END}\n"
