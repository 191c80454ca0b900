"""What an MCP answer costs an agent: tokens (characters / 4) of `tools/list` and of each default
`search` answer, and the share of an answer's characters that is code, over a real stdio session.

    python benchmarks/mcp_answer_cost.py TREE QUERIES.json [--k 10]

QUERIES.json is the study's format (`{"queries": [{"q": ...}, ...]}`, e.g.
../shared/bench/requests-seed.json with TREE an unpacked requests 2.32.3). An answer's size counts
its text and, when a server sends one, its structured copy: a client may pass both to the model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def measure(tree: str, questions: list[str], k: int | None) -> dict[str, float]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "codewhere", "mcp", tree], env=dict(os.environ))
    async with stdio_client(params) as streams:
        async with ClientSession(*streams) as session:
            started = await session.initialize()
            tools = await session.list_tools()
            listing = json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools],
                                 separators=(",", ":"))
            sizes, shares = [], []
            for question in questions:
                arguments: dict[str, object] = {"query": question} | ({"k": k} if k else {})
                result = await session.call_tool("search", arguments)
                text = "".join(getattr(c, "text", "") for c in result.content)
                structured = json.dumps(result.structured_content, separators=(",", ":")) if result.structured_content else ""
                sizes.append(len(text) + len(structured))
                hits = json.loads(text)["hits"]
                shares.append(sum(len(h.get("snippet", "")) for h in hits) / max(1, len(text)))
    return {"tools_list_tokens": len(listing) / 4, "instructions_tokens": len(started.instructions or "") / 4,
            "answer_tokens_median": statistics.median(sizes) / 4, "code_share_median": statistics.median(shares)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree")
    parser.add_argument("queries")
    parser.add_argument("--k", type=int, default=None, help="hits an answer asks for (default: the server's)")
    args = parser.parse_args()
    with open(args.queries, encoding="utf-8") as file:
        questions = [q.get("q") or q["query"] for q in json.load(file)["queries"]]
    print(json.dumps(anyio.run(measure, args.tree, questions, args.k), indent=2))


if __name__ == "__main__":
    main()
