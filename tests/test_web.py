"""`codewhere serve`: the real server started through the CLI, asked over real HTTP, and driven in
a real headless Chromium (Debian's `chromium`, through Playwright) for what a person sees."""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_REPO, write_tree

CHROMIUM = os.environ.get("CODEWHERE_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("CODEWHERE_TEST_ARTIFACTS", Path(__file__).parent / "artifacts"))
START_SECONDS = 120.0


@dataclass
class Served:
    process: subprocess.Popen[str]
    address: str  # as printed, with ?token= when there is one
    root: Path

    @property
    def base(self) -> str:
        return self.address.split("?", 1)[0].rstrip("/")

    @property
    def token(self) -> str:
        return self.address.split("?token=", 1)[1] if "?token=" in self.address else ""

    def get(self, path: str, headers: dict[str, str] | None = None, with_token: bool = True) -> tuple[int, str, dict[str, str]]:
        """GET `path`, carrying the printed token in its cookie unless `with_token` is False."""
        headers = dict(headers or {})
        if with_token and self.token:
            headers.setdefault("Cookie", f"codewhere_token={self.token}")
        request = urllib.request.Request(self.base + path, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read().decode(), dict(response.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), dict(exc.headers)


def start(root: Path, cache: Path, *extra: str) -> Served:
    env = {**os.environ, "CODEWHERE_CACHE_DIR": str(cache)}
    env.pop("CODEWHERE_MODEL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "codewhere", "serve", str(root), "--port", "0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:  # polled with a deadline: the first index takes what it takes
        if selector.select(timeout=1.0):
            line = process.stdout.readline().strip()
            if line.startswith("http://"):
                return Served(process, line, root)
        if process.poll() is not None:
            raise AssertionError(f"codewhere serve exited {process.returncode}: {process.stderr.read() if process.stderr else ''}")
    process.kill()
    raise AssertionError("codewhere serve printed no address in time")


def stop(served: Served) -> str:
    served.process.terminate()
    try:
        _, err = served.process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        served.process.kill()
        _, err = served.process.communicate()
    return err


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("web")
    root = write_tree(base / "repo", SAMPLE_REPO)
    queries = base / "queries.json"
    queries.write_text(json.dumps({"queries": [
        {"q": "send money to the payment gateway", "symbol": "charge_credit_card", "path": "src/shop/payment.py", "line": 2},
        {"q": "put something in the basket", "symbol": "add_item", "path": "src/shop/cart.py", "line": 8},
    ]}))
    running = start(root, base / "cache", "--eval", str(queries))
    yield running
    stderr = stop(running)
    assert "Traceback" not in stderr, stderr


# ---- over HTTP --------------------------------------------------------------------------------


def test_search_page_shows_the_right_hit_highlighted_with_its_line_numbers_and_why(served: Served) -> None:
    status, page, headers = served.get("/?q=charge_credit_card")
    assert status == 200 and headers["content-type"].startswith("text/html")
    first = page.index('class="hit"')
    assert 'src/shop/payment.py:2-' in page[first:first + 800]
    assert 'class="code"' in page and 'class="linenos"' in page  # Pygments, with line numbers
    assert re.search(r"matches the question&#39;s words \(#\d+\)", page) or re.search(r"matches the question's words \(#\d+\)", page)  # why, in words
    assert "×0<" not in page and "definition no." not in page  # no jargon, no factor of nothing
    assert "/file?root=0&amp;path=src%2Fshop%2Fpayment.py" in page  # the link to the file at that line
    assert "#L-2" in page


def test_search_modes_and_scope_are_applied(served: Served) -> None:
    _, page, _ = served.get("/?q=charge_credit_card&mode=keyword&scope=tests")
    assert "tests/test_payment.py" in page and "src/shop/payment.py:" not in page
    assert '<option value="keyword" selected>' in page


def test_ripgrep_habits_on_the_page_and_in_the_api(served: Served) -> None:
    # -g: a glob keeps the tests out; -t: a type keeps only its language
    _, page, _ = served.get("/?q=charge_credit_card&mode=keyword&glob=!tests/")
    assert "src/shop/payment.py:" in page and "tests/test_payment.py" not in page
    _, body, _ = served.get("/api/search?q=charge_credit_card&mode=keyword&glob=tests/**")
    assert {h["path"] for h in json.loads(body)["hits"]} == {"tests/test_payment.py"}
    _, body, _ = served.get("/api/search?q=charge_credit_card&type=go")
    assert {h["language"] for h in json.loads(body)["hits"]} == {"go"}
    # -C: the hit's lines widen to the file's lines around them; max_lines cuts them
    _, plain, _ = served.get("/api/search?q=refund_payment&k=1")
    _, wide, _ = served.get("/api/search?q=refund_payment&k=1&context=2")
    plain_hit, wide_hit = json.loads(plain)["hits"][0], json.loads(wide)["hits"][0]
    assert wide_hit["snippet"].count("\n") > plain_hit["snippet"].count("\n")
    _, cut, _ = served.get("/api/search?q=refund_payment&k=1&context=2&max_lines=1")
    assert "\n" not in json.loads(cut)["hits"][0]["snippet"]
    # -l: the paths alone, once each, best first
    _, page, _ = served.get("/?q=payment&files=1")
    listing = page[page.index('class="paths"'):]
    assert "src/shop/payment.py" in listing and 'class="hit"' not in page
    _, body, _ = served.get("/api/search?q=payment&files=1")
    data = json.loads(body)
    assert data["paths"] == list(dict.fromkeys(h["path"] for h in data["hits"]))
    status, page, _ = served.get("/?q=x&context=lots")
    assert status == 400 and "context must be a number of lines" in page


def test_a_bad_request_is_one_clear_message_not_a_traceback(served: Served) -> None:
    status, page, _ = served.get("/?q=x&k=abc")
    assert status == 400 and "k must be a number from 1 to 100" in page and "Traceback" not in page
    status, page, _ = served.get("/?q=x&mode=fuzzy")
    assert status == 400 and "unknown mode" in page


def test_file_view_has_anchored_lines_the_marked_range_and_an_outline(served: Served) -> None:
    status, page, _ = served.get("/file?path=src/shop/cart.py&hl=8-10")
    assert status == 200
    assert 'id="L-8"' in page and 'class="hll"' in page
    outline = page[page.index('class="outline"'):page.index('class="source"')]
    assert "Cart" in outline and "add_item" in outline and "total_price" in outline
    assert "/symbol?root=0&amp;name=src%2Fshop%2Fcart.py%3A" in outline


def test_file_view_serves_only_indexed_files_inside_the_root(served: Served) -> None:
    secret = served.root.parent / "secret.txt"
    secret.write_text("do not show")
    for path in ("../secret.txt", str(secret), "/etc/passwd", "src/shop/../../../secret.txt", "nothing/here.py"):
        status, page, _ = served.get("/file?path=" + urllib.request.quote(path))
        assert status == 400, path
        assert "do not show" not in page and "root:" not in page


def test_symbol_view_draws_callers_and_callees_and_lists_the_impact(served: Served) -> None:
    status, page, _ = served.get("/symbol?name=charge_credit_card")
    assert status == 200
    svg = page[page.index("<svg"):page.index("</svg>")]
    assert "gateway_request" in svg  # a callee, as a box
    assert "test_charge_credit_card_rejects_zero" in svg  # a caller, as a box
    assert svg.count('class="edge"') >= 2
    assert "Impact of a change" in page and "test_charge_credit_card_rejects_zero" in page.split("Impact of a change")[1]


def test_an_ambiguous_or_unknown_symbol_offers_a_choice_or_says_so(served: Served) -> None:
    status, page, _ = served.get("/symbol?name=nothing_by_this_name")
    assert status == 404 and "no symbol named" in page


def test_status_and_eval_report_are_pages_of_their_own(served: Served) -> None:
    status, page, _ = served.get("/status")
    assert status == 200 and str(served.root) in page and "chunks:" in page
    assert "<dt>files</dt>" in page and "<dt>model</dt>" in page and "<dt>root</dt>" not in page  # a panel, the root once
    status, page, _ = served.get("/eval")
    assert status == 200 and "hybrid" in page and "<svg" in page  # the report's table and plots


def test_json_search_has_the_cli_shape(served: Served) -> None:
    status, body, _ = served.get("/api/search?q=refund_payment&k=3")
    data = json.loads(body)
    assert status == 200 and data["query"] == "refund_payment"
    assert data["hits"][0]["path"] == "src/shop/payment.py" and data["hits"][0]["symbol"] == "refund_payment"
    cli = subprocess.run([sys.executable, "-m", "codewhere", "search", "refund_payment", str(served.root), "-k", "3", "--json"],
                         capture_output=True, text=True, env={**os.environ, "CODEWHERE_CACHE_DIR": str(served.root.parent / "cache")})
    assert [h["location"] for h in json.loads(cli.stdout)["hits"]] == [h["location"] for h in data["hits"]]


def test_pages_need_nothing_from_the_network(served: Served) -> None:
    for path in ("/", "/?q=cart", "/file?path=src/shop/cart.py", "/symbol?name=Cart", "/status"):
        _, page, _ = served.get(path)
        assert not re.search(r'(src|href)="(https?:)?//', page), path


def test_a_foreign_host_header_is_refused_on_loopback(served: Served) -> None:
    status, _, _ = served.get("/", headers={"Host": "attacker.example"})
    assert status == 400


def test_another_address_needs_the_token_then_keeps_it_in_a_cookie(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", SAMPLE_REPO)
    running = start(root, tmp_path / "cache", "--host", "127.0.0.2")
    try:
        assert "?token=" in running.address
        token = running.address.split("?token=", 1)[1]
        status, page, _ = running.get("/?q=cart", with_token=False)
        assert status == 401 and "token" in page
        status, _, _ = running.get("/?q=cart&token=wrong", with_token=False)
        assert status == 401
        status, _, headers = running.get(f"/?q=cart&token={token}", with_token=False)
        assert status == 200 and "codewhere_token=" in headers.get("set-cookie", "")
        status, _, _ = running.get("/status", headers={"Cookie": f"codewhere_token={token}"})
        assert status == 200
    finally:
        stop(running)


def test_loopback_needs_the_token_too_unless_turned_off(tmp_path: Path, served: Served) -> None:
    """Another account on the same machine reaches 127.0.0.1 as well (issue 53, item 3)."""
    assert served.token, served.address
    status, page, _ = served.get("/file?path=src/shop/cart.py", with_token=False)
    assert status == 401 and "class" not in page
    status, _, _ = served.get("/api/search?q=cart", with_token=False)
    assert status == 401
    root = write_tree(tmp_path / "repo", {"a.py": "def cart():\n    pass\n"})
    running = start(root, tmp_path / "cache", "--no-token")
    try:
        assert "?token=" not in running.address
        assert running.get("/?q=cart")[0] == 200
    finally:
        stop(running)
    refused = subprocess.run([sys.executable, "-m", "codewhere", "serve", str(root), "--no-token", "--host", "0.0.0.0", "--port", "0"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--no-token" in refused.stderr


def test_a_big_file_is_shown_a_page_at_a_time(tmp_path: Path) -> None:
    body = "".join(f"def function_{i}(value):\n    return value + {i}\n\n" for i in range(10_000))  # 30,000 lines
    long_functions = "".join(f"def long_{i}():\n" + "    x = 1\n" * 28 + "    return x\n\n" for i in range(100))  # 3,100 lines
    root = write_tree(tmp_path / "repo", {"big.py": body, "long.py": long_functions})
    running = start(root, tmp_path / "cache")
    try:
        status, page, _ = running.get("/file?path=long.py")  # few definitions: all outlined, each linking its page
        assert status == 200 and "long_99" in page and "from=2870#L-3070" in page  # long_99, on a later page: 200 lines above it
        status, page, _ = running.get("/file?path=big.py")
        assert status == 200 and 'id="L-1"' in page and 'id="L-2000"' in page and 'id="L-2001"' not in page
        assert "later lines" in page and len(page) < 2_000_000
        status, page, _ = running.get("/file?path=big.py&hl=25000-25002")
        assert status == 200 and 'id="L-25000"' in page and 'id="L-1"' not in page and "earlier lines" in page
        assert "more on other pages" in page and len(page) < 2_000_000
    finally:
        stop(running)


def test_a_taken_port_is_one_line_before_any_indexing(tmp_path: Path, served: Served) -> None:
    port = served.base.rsplit(":", 1)[1]
    result = subprocess.run([sys.executable, "-m", "codewhere", "serve", str(tmp_path), "--port", port],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("codewhere: cannot listen on 127.0.0.1:") and "--port" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# ---- in a real browser ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():  # noqa: ANN201 — a Playwright Browser
    required = os.environ.get("CODEWHERE_TEST_BROWSER") == "1"  # .ci/run installs Chromium and sets this
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            pytest.fail("playwright is not installed (pip install -e '.[test]')")
        pytest.skip("playwright is not installed")
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        if required:
            pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium")
        pytest.skip("Debian's chromium is not installed")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"), headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"],
        )
        yield launched
        launched.close()


def test_in_a_browser_search_open_the_file_and_the_symbol_graph_without_console_errors(served: Served, browser) -> None:  # noqa: ANN001
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("requestfailed", lambda request: problems.append(f"failed: {request.url}"))

    page.goto(served.address)
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("/")  # focuses the search box
    page.keyboard.type("send the amount to the payment gateway")
    page.keyboard.press("Enter")
    page.wait_for_selector("li.hit")
    first = page.locator("li.hit").first
    assert first.locator("a.location").inner_text().startswith("src/shop/payment.py:2-")
    assert first.locator("ul.why li").count() >= 1
    assert first.locator("td.linenos").count() == 1
    page.screenshot(path=str(ARTIFACTS / "search.png"), full_page=True)

    first.locator("a.location").click()
    page.wait_for_selector("aside.outline")
    assert "/file?" in page.url and "hl=2-6#L-3" in page.url  # the definition marked, the best-matching line in view
    assert page.locator("span.hll").count() >= 1  # the hit's lines are marked
    assert page.locator("aside.outline a", has_text="charge_credit_card").count() == 1
    page.screenshot(path=str(ARTIFACTS / "file.png"))

    page.locator("aside.outline a", has_text="charge_credit_card").click()
    page.wait_for_selector("svg.callgraph")
    assert page.locator("svg.callgraph g.node").count() >= 3  # the symbol, a caller, a callee
    assert (page.locator("svg.callgraph g.caller text").first.text_content() or "").startswith("test_charge_credit_card")
    page.screenshot(path=str(ARTIFACTS / "symbol.png"), full_page=True)

    with page.expect_navigation():
        page.locator("svg.callgraph a", has_text="gateway_request").click()  # a box is a link to that symbol's page
    assert "gateway_request" in page.locator("h1.symbol-name").inner_text()

    page.goto(served.base + "/status")
    page.wait_for_selector("section.status")
    page.goto(served.base + "/eval")
    page.wait_for_selector(".eval table")
    page.close()
    assert problems == []


def test_serve_over_a_hostile_tree_answers_at_once(tmp_path: Path) -> None:
    """Issue 53: a named pipe wedged `serve`; the rest of the hostile set must not either."""
    from tests.test_hostile import HOSTILE_FILES

    root = write_tree(tmp_path / "repo", {"good.py": "def good_function():\n    return 2\n",
                                          "deep.js": HOSTILE_FILES["unclosed_arrays.js"], ".gitignore": "*" * 200 + "z\n"})
    os.mkfifo(root / "pipe.py")
    with open(os.fsencode(root) + b"/caf\xff.py", "wb") as file:
        file.write(b"x = 1\n")
    (root / "everything").symlink_to("/")
    running = start(root, tmp_path / "cache")
    try:
        for _ in range(3):
            started = time.monotonic()
            status, body, _ = running.get("/api/search?q=good_function&k=3")
            assert status == 200 and json.loads(body)["hits"][0]["path"] == "good.py"
            assert time.monotonic() - started < 1.0
        assert running.get("/status")[0] == 200
        status, page, _ = running.get("/file?path=pipe.py")
        assert status != 200 and "Traceback" not in page
    finally:
        stderr = stop(running)
    assert "Traceback" not in stderr


def test_call_graph_boxes_that_would_read_the_same_keep_their_distinct_ends() -> None:
    from codewhere.web.graph_svg import MAX_LABEL, Node, call_graph_svg

    names = ["test_should_bypass_proxies_win_registry", "test_should_bypass_proxies_win_registry_bad_values",
             "test_should_bypass_proxies_pass_only_hostname", "short_one"]
    svg = call_graph_svg(Node("should_bypass_proxies", "utils.py:765", None), [Node(n, "tests", None) for n in names], [])
    labels = re.findall(r'class="node caller[^"]*"><title>[^<]*</title><rect[^>]*/><text[^>]*>([^<]*)</text>', svg)
    assert len(labels) == 4 and len(set(labels)) == 4 and all(len(label) <= MAX_LABEL for label in labels)
    assert "short_one" in labels and "test_should_bypass_proxies_pa…" in labels  # alone with its cut: cut at the end
    assert any(label.endswith("win_registry") for label in labels)  # the two that collided keep their ends
