"""The MCP server as an agent sees it: first-call and warm tool latency, and tokens per answer.

    python benchmarks/mcp_bench.py --requests-mirror PATH [--django] [--runs 5] [--settle SECONDS]
    python benchmarks/mcp_bench.py --requests-mirror PATH --django --first-contact --runs 3

Starts `codewhere mcp ROOT` with a fresh cache and talks to it with the official SDK client over
stdio, once with its file watcher (the default) and once with `--no-watch` (each answer checks
every file first, as before the watcher), in the same run. Tokens are counted as characters / 4 for the search answer, and for the alternative an
agent has without it: reading every file that holds one of the top hits.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codewhere.config import Settings  # noqa: E402
from codewhere.embed.registry import ensure_default_model  # noqa: E402
from corpora import from_sdist, requests_corpus  # noqa: E402

QUERIES = {
    "requests": ["skip the proxy for machines on the local network", "raise_for_status", "how are redirects followed",
                 "read saved logins from a file in the home folder", "retry a request after a connection error"],
    "django": ["QuerySet", "csrf token check", "how are migrations detected", "password hashing", "reverse url lookup"],
}


async def measure(root: Path, queries: list[str], runs: int, watch: bool = True, settle: float = 0.0) -> dict[str, object]:
    env = dict(os.environ)
    env["CODEWHERE_CACHE_DIR"] = tempfile.mkdtemp()
    env["CODEWHERE_MODELS_DIR"] = str(Settings.from_env().model_cache)
    args = ["-m", "codewhere", "mcp", str(root), *([] if watch else ["--no-watch"])]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    async with stdio_client(params) as streams:
        async with ClientSession(*streams) as session:
            await session.initialize()
            started = time.perf_counter()
            await session.call_tool("search", {"query": queries[0]})
            first = time.perf_counter() - started
            await anyio.sleep(settle)  # the server's background work after a first index (keyword postings)
            warm, answer_tokens, file_tokens = [], [], []
            for _ in range(runs):
                for q in queries:
                    started = time.perf_counter()
                    result = await session.call_tool("search", {"query": q})
                    warm.append(time.perf_counter() - started)
            for q in queries:
                result = await session.call_tool("search", {"query": q})
                text = result.content[0].text
                answer_tokens.append(len(text) / 4)
                files = {json.loads(text)["hits"][i]["location"].split(":")[0] for i in range(len(json.loads(text)["hits"]))}
                file_tokens.append(sum(len((root / f).read_text(errors="replace")) for f in files) / 4)
            started = time.perf_counter()
            for _ in range(runs):
                await session.call_tool("index_status", {})
            status_ms = (time.perf_counter() - started) / runs * 1000
    return {
        "first_call_ms": round(first * 1000), "warm_search_p50_ms": round(statistics.median(warm) * 1000, 1),
        "index_status_ms": round(status_ms, 1),
        "tokens_per_search_median": round(statistics.median(answer_tokens)),
        "tokens_reading_hit_files_median": round(statistics.median(file_tokens)),
    }


async def first_contact(root: Path, query: str) -> dict[str, object]:
    """Issue 51's first contact on an empty cache: spawn to `initialize` answered, spawn to the
    first search answer (partial while the index builds, as it says), and `index_status`'s size."""
    env = dict(os.environ)
    env["CODEWHERE_CACHE_DIR"] = tempfile.mkdtemp()
    env["CODEWHERE_MODELS_DIR"] = str(Settings.from_env().model_cache)
    params = StdioServerParameters(command=sys.executable, args=["-m", "codewhere", "mcp", str(root)], env=env)
    spawned = time.perf_counter()
    async with stdio_client(params) as streams, ClientSession(*streams) as session:
        await session.initialize()
        initialized = time.perf_counter() - spawned
        result = await session.call_tool("search", {"query": query})
        first = time.perf_counter() - spawned
        answer = json.loads(result.content[0].text)
        status = await session.call_tool("index_status", {})
        status_text = "".join(getattr(c, "text", "") for c in status.content)
    return {"initialize_ms": round(initialized * 1000), "first_answer_ms": round(first * 1000),
            "first_answer_hits": len(answer.get("hits", [])), "first_answer_index": answer.get("index", "complete"),
            "index_status_tokens": round(len(status_text) / 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests-mirror")
    parser.add_argument("--django", action="store_true")
    parser.add_argument("--first-contact", action="store_true",
                        help="only spawn -> initialize -> first answer on an empty cache, and index_status's size")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=0.0,
                        help="seconds to wait after the first call before the warm calls (default 0)")
    args = parser.parse_args()
    ensure_default_model(Settings.from_env().model_cache)
    corpora = [("requests 2.32.3", requests_corpus(args.requests_mirror), QUERIES["requests"])]
    if args.django:
        corpora.append(("Django 5.1.4", from_sdist("Django", "5.1.4"), QUERIES["django"]))
    results: dict[str, object] = {}
    for name, root, queries in corpora:
        if args.first_contact:
            results[name] = [anyio.run(first_contact, root, queries[0]) for _ in range(args.runs)]
            continue
        watched = anyio.run(measure, root, queries, args.runs, True, args.settle)
        checked = anyio.run(measure, root, queries, args.runs, False, args.settle)
        ratio = float(watched["warm_search_p50_ms"]) / float(checked["warm_search_p50_ms"])  # type: ignore[arg-type]
        results[name] = {"watcher": watched, "no watcher": checked, "warm p50 watcher / no watcher": round(ratio, 3)}
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
