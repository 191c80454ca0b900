"""The docs that are generated from the code are current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_cli_reference_is_what_the_cli_prints() -> None:
    generated = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py")], capture_output=True,
                               text=True, check=True).stdout
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == generated, \
        "docs/cli.md is stale: run `python scripts/cli_reference.py > docs/cli.md`"
