"""benchmarks/mine_functions.py on a real git history made here: which commits become questions,
and where their gold points at the pinned revision."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import mine_functions  # noqa: E402

BASE = '''"""Shop."""


def total_price(items):
    """The sum of the prices."""
    return sum(item.price for item in items)


def apply_discount(price, rate):
    return price - price * rate


class Cart:
    def add(self, item):
        self.items.append(item)
'''


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, files: dict[str, str], subject: str) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", subject)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "shop"
    repo.mkdir()
    _git(repo, "init", "-q")
    _commit(repo, {"src/shop.py": BASE}, "Start the shop")
    v1 = BASE.replace("price - price * rate", "max(price - price * rate, 0)")
    _commit(repo, {"src/shop.py": v1}, "Never let a reduced price fall below zero (#12)")
    v2 = v1.replace("self.items.append(item)", "self.items.append(item)\n        self.count += 1")
    _commit(repo, {"src/shop.py": v2}, "fix: keep count of what was put in the basket")
    v3 = v2.replace("return sum(item.price for item in items)", "return round(sum(item.price for item in items), 2)")
    _commit(repo, {"src/shop.py": v3, "tests/test_shop.py": "def test_total():\n    assert True\n"},
            "Round totals to cents as shown on receipts")
    both = v3.replace('"""Shop."""', '"""The shop."""').replace("max(price", "min(price")
    _commit(repo, {"src/shop.py": both}, "Change how prices and the module header are shown")  # two places
    _commit(repo, {"src/shop.py": both.replace("round(", "round( ")}, "typo in the total price rounding code")
    pinned = _commit(repo, {"src/shop.py": "# moved down by a new header line\n" + both.replace("round( ", "round(")},
                     "Prepend a header line to the shop module for readers")
    return repo, pinned


def test_a_commit_inside_one_function_becomes_a_question_with_gold_at_the_pinned_revision(history) -> None:  # noqa: ANN001
    repo, pinned = history
    spec = {"name": "shop", "revision": pinned, "benchmark_root": ""}
    mined = {q.qualified_name: q for q in mine_functions.mine_repo(spec, repo, per_repo=10, scan=100)}
    # the discount fix, the basket count and the rounding (a test changed beside it) are questions
    assert set(mined) == {"apply_discount", "Cart.add", "total_price"}
    discount = mined["apply_discount"]
    assert discount.query == "Never let a reduced price fall below zero"  # without its PR number
    assert mined["Cart.add"].query == "keep count of what was put in the basket"  # without its prefix
    # gold is where the function is at the pinned revision: one line lower than where it changed
    assert (discount.path, discount.line, discount.end_line) == ("src/shop.py", 10, 11)
    assert mined["total_price"].line == 5 and mined["Cart.add"].qualified_name == "Cart.add"


def test_subjects_that_name_the_function_or_do_not_describe_behaviour_are_refused() -> None:
    says = mine_functions.describes_behaviour
    assert says("Never let a reduced price fall below zero", "apply_discount")
    assert not says("Fix apply_discount for negative prices", "apply_discount")  # the name
    assert not says("Make the discount apply to negative prices", "apply_discount")  # all its split words
    assert not says("Keep the Cart counting when adding items", "Cart.add")  # what encloses it
    assert not says("Reduce prices", "apply_discount")  # too short
    assert not says("typo in the total price rounding code", "total_price")
    assert not says("Refactor the way that prices are reduced", "apply_discount")
    assert mine_functions.clean_subject("\u267b\ufe0f Simplify the price code paths a lot") == ""  # a refactoring's emoji
    assert mine_functions.clean_subject("\U0001f41b Fix rounding of totals on receipts (#3)") == "Fix rounding of totals on receipts"
