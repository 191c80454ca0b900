"""What the package imports, it declares: a module that arrives only through another package's
dependencies (Jinja2 came with model2vec) breaks the day that package drops it."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imported_top_level() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted((ROOT / "src" / "codewhere").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    specs = list(project["dependencies"]) + [s for group in project["optional-dependencies"].values() for s in group]
    return {re.split(r"[\[<>=!~; ]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in specs}


def test_every_third_party_import_is_a_declared_dependency() -> None:
    distributions = packages_distributions()
    declared = _declared()
    missing = []
    for module, where in _imported_top_level().items():
        if module in sys.stdlib_module_names or module in ("codewhere", "__future__"):
            continue
        owners = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
        if owners and owners.isdisjoint(declared):
            missing.append(f"{module} ({where}; from {', '.join(sorted(owners))})")
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(missing)
