"""Examples for each command's --help (and so docs/cli.md); tests/test_docs.py parses every one
with the real parser, so a renamed flag fails the tests instead of the reader."""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "index": (
        "codewhere index                       # the repository you are in",
        "codewhere index ~/src/requests --json",
        "codewhere index --quality             # add MiniLM's vectors (pip install 'codewhere[onnx]')",
        "codewhere index --rebuild --model onnx:minilm",
    ),
    "search": (
        'codewhere search "skip the proxy for machines on the local network"',
        "codewhere search raise_for_status -k 3",
        "codewhere search \"parse the headers\" -g '*.py' -C 3    # ripgrep's habits: glob, context",
        'codewhere search "retry failed uploads" -l -t py          # paths only, Python only',
        'codewhere search "session cookie" --exclude-tests --json',
        'codewhere search Router --mode keyword --scope src/',
    ),
    "eval": (
        "codewhere eval queries.json --modes hybrid,keyword,semantic",
        "codewhere eval queries.json --ablation --report report.html",
    ),
    "refs": ("codewhere refs Session.send", "codewhere refs should_bypass_proxies --json"),
    "callers": ("codewhere callers should_bypass_proxies", "codewhere callers raise_for_status --json"),
    "callees": ("codewhere callees Session.request",),
    "impact": ("codewhere impact Session.send --depth 2",),
    "outline": ("codewhere outline src/requests/sessions.py",),
    "symbols": ("codewhere symbols proxy -k 5", "codewhere symbols Session --json"),
    "graph-stats": ("codewhere graph-stats --json",),
    "mcp": ("codewhere mcp                          # stdio; connect an agent with `codewhere install`",
            "codewhere mcp --quality ~/src/a ~/src/b"),
    "install": ("codewhere install --agent claude", "codewhere install --agent cursor --print",
                "codewhere install --agent claude --uninstall"),
    "watch": ("codewhere watch", "codewhere watch --poll ~/nfs/repo"),
    "serve": ("codewhere serve                        # http://127.0.0.1:8765/?token=…",
              "codewhere serve --port 0 --no-token ~/src/requests"),
    "config": ("codewhere config", "codewhere config --json"),
    "status": ("codewhere status", "codewhere status ~/src/requests --json"),
}


def epilog(command: str) -> str | None:
    lines = EXAMPLES.get(command)
    return None if not lines else "examples:\n" + "\n".join(f"  {line}" for line in lines)
