"""Write docs/cli.md from the CLI's own --help, so the reference cannot drift from the code.

    python scripts/cli_reference.py > docs/cli.md

tests/test_docs.py checks that docs/cli.md is what this prints.
"""

from __future__ import annotations

import argparse
import os


def reference() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: one width for everyone
    from codewhere.cli import build_parser

    parser = build_parser()
    parts = ["# The codewhere command line", "",
             "Generated from `codewhere --help` by `scripts/cli_reference.py`; do not edit by hand.", "",
             "```text", parser.format_help().rstrip(), "```", ""]
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    for name, sub in commands.choices.items():
        parts += [f"## `codewhere {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
        for action in sub._actions:  # noqa: SLF001 — a command with actions of its own (`model build`)
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for inner, parser_of in action.choices.items():
                    parts += [f"### `codewhere {name} {inner}`", "", "```text", parser_of.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    print(reference(), end="")
