"""The web page's speed: a search page, a file view and a symbol view served by `codewhere serve`
on psf/requests 2.32.3, timed over real HTTP from request to the last byte (server work, search,
highlighting and transfer), median and p90 of several rounds, after one warm-up request each.

    python benchmarks/web_bench.py [--rounds 20] [--json results/web_requests.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from corpora import requests_corpus  # noqa: E402

QUERIES = [
    "skip the proxy for machines on the local network", "raise_for_status", "don't send the password to another site after a redirect",
    "how are cookies merged into a request", "guess the encoding of a response body", "HTTPAdapter.send",
]
PAGES = ["/file?path=src/requests/utils.py", "/symbol?name=should_bypass_proxies", "/status"]


def timed(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        assert response.status == 200, url
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--mirror", default=None, help="a git mirror of psf/requests (else the PyPI sdist)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    root = requests_corpus(args.mirror)
    with tempfile.TemporaryDirectory() as cache:
        server = subprocess.Popen([sys.executable, "-m", "codewhere", "serve", str(root), "--port", "0", "--quiet"],
                                  stdout=subprocess.PIPE, text=True, env={**__import__("os").environ, "CODEWHERE_CACHE_DIR": cache})
        try:
            assert server.stdout is not None
            base = server.stdout.readline().strip().rstrip("/")
            urls = {f"search: {q}": f"{base}/?{urllib.parse.urlencode({'q': q})}" for q in QUERIES}
            urls.update({page.split("?")[0].strip("/") or "status": base + page for page in PAGES})
            for url in urls.values():
                timed(url)  # warm-up: first use of a lexer, the symbol tables
            samples: dict[str, list[float]] = {name: [] for name in urls}
            for _ in range(args.rounds):
                for name, url in urls.items():
                    samples[name].append(timed(url))
        finally:
            server.terminate()
            server.wait(timeout=30)
    rows = {name: {"p50_ms": round(statistics.median(v), 2), "p90_ms": round(sorted(v)[int(0.9 * (len(v) - 1))], 2)}
            for name, v in samples.items()}
    searches = [x for name, v in samples.items() if name.startswith("search") for x in v]
    summary = {"search_pages_p50_ms": round(statistics.median(searches), 2), "rounds": args.rounds, "pages": rows}
    for name, row in rows.items():
        print(f"{row['p50_ms']:8.2f} ms p50  {row['p90_ms']:8.2f} ms p90  {name}")
    print(f"search pages, all queries: p50 {summary['search_pages_p50_ms']} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
