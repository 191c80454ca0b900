from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from codewhere.api import Index
from codewhere.config import Settings
from codewhere.errors import QueryError
from codewhere.graph import Resolution, resolve_edges
from codewhere.types import EdgeRow, Filters, SymbolRef
from tests.conftest import write_tree

FIXTURES = Path(__file__).with_name("fixtures") / "graph"
TRUTH = json.loads((FIXTURES / "truth.json").read_text())


def indexed(tmp_path: Path, language: str) -> Index:
    root = tmp_path / language
    shutil.copytree(FIXTURES / language, root)
    index = Index.open(root, settings=Settings.from_env())
    index.refresh(vectors=False)
    return index


def call_pairs(index: Index) -> set[tuple[str, str]]:
    pairs = set()
    symbols = [s for path in index.store.indexed_paths(Filters()) for s in index.store.outline(path)]
    for symbol in symbols:
        for edge in index.store.edges_from(symbol.id, ("call",)):
            if edge.target_id is not None:
                target = index.store.symbols_by_id([edge.target_id])[edge.target_id]
                pairs.add((symbol.qualified_name, target.qualified_name))
    return pairs


@pytest.mark.parametrize("language", sorted(TRUTH))
def test_symbols_are_exactly_the_hand_made_truth(tmp_path: Path, language: str, store_kind: str) -> None:
    with indexed(tmp_path, language) as index:
        found = {
            s.qualified_name: s.kind
            for path in index.store.indexed_paths(Filters())
            for s in index.store.outline(path)
        }
    assert found == TRUTH[language]["symbols"]


@pytest.mark.parametrize("language", sorted(TRUTH))
def test_resolved_call_edges_have_full_precision_and_recall(tmp_path: Path, language: str, store_kind: str) -> None:
    with indexed(tmp_path, language) as index:
        found = call_pairs(index)
    truth = {tuple(pair) for pair in TRUTH[language]["calls"]}
    assert found == truth  # precision 1.0 (nothing extra) and recall 1.0 (nothing missing)


@pytest.mark.parametrize("language", sorted(lang for lang in TRUTH if "inherits" in TRUTH[lang]))
def test_inheritance_edges(tmp_path: Path, language: str, store_kind: str) -> None:
    with indexed(tmp_path, language) as index:
        pairs = set()
        for base_name in {b for _, b in TRUTH[language]["inherits"]}:
            base = index.symbol(base_name)
            for ref in index.refs(base_name)[1]:
                if ref.kind == "inherit" and ref.source:
                    pairs.add((ref.source.qualified_name, base.qualified_name))
    assert pairs == {tuple(p) for p in TRUTH[language]["inherits"]}


def test_python_symbol_details(tmp_path: Path, store_kind: str) -> None:
    with indexed(tmp_path, "python") as index:
        side = index.symbol("Square.side")
        shape = index.symbol("Shape")
        (describe,) = [s for s in index.outline("shapes.py") if s.name == "describe"]
    assert side.start_line == 15 and side.end_line == 17  # the decorator starts the span
    assert describe.signature == "def describe(self)" and describe.parent == "Shape"
    assert shape.doc == "A shape."


def test_impact_walks_callers_and_subclasses_with_distance(tmp_path: Path, store_kind: str) -> None:
    with indexed(tmp_path, "python") as index:
        _, impacted = index.impact("square", depth=3)
        impacted = impacted.items
        assert [(i.symbol.qualified_name, i.distance) for i in impacted] == [("area_of", 1), ("Square.area", 2)]
        _, by_shape = index.impact("Shape", depth=1)
        assert [(i.symbol.qualified_name, i.via) for i in by_shape.items] == [("Square", "inherit")]


def test_ambiguous_names_list_candidates_and_path_line_selects(tmp_path: Path, store_kind: str) -> None:
    root = write_tree(tmp_path / "repo", {
        "a.py": "def run():\n    helper()\n\ndef helper():\n    pass\n",
        "b.py": "def run():\n    pass\n",
    })
    with Index.open(root, settings=Settings.from_env()) as index:
        index.refresh(vectors=False)
        with pytest.raises(QueryError) as err:
            index.callees("run")
        assert "a.py:1" in str(err.value) and "b.py:1" in str(err.value)
        symbol, refs = index.callees("a.py:2")
        assert symbol.path == "a.py" and [r.target.qualified_name for r in refs if r.target] == ["helper"]
        with pytest.raises(QueryError, match="no symbol"):
            index.callers("nothing_like_this")


def test_edges_into_a_changed_file_are_re_resolved(tmp_path: Path, store_kind: str) -> None:
    root = write_tree(tmp_path / "repo", {
        "caller.py": "from lib import work\n\ndef main():\n    work()\n",
        "lib.py": "def work():\n    pass\n",
    })
    with Index.open(root, settings=Settings.from_env()) as index:
        index.refresh(vectors=False)
        assert [r.source.qualified_name for r in index.callers("work")[1]] == ["main"]
        (root / "lib.py").write_text("def other():\n    pass\n\n\ndef work():\n    return 1\n")
        index.refresh(vectors=False)
        symbol, callers = index.callers("work")
        assert symbol.start_line == 5 and [r.resolution for r in callers] == [Resolution.IMPORT]
        (root / "lib.py").unlink()
        index.refresh(vectors=False)
        assert index.store.unresolved_edges_named("work", ("call",))[0].resolution == Resolution.EXTERNAL


def test_resolution_levels_on_hand_made_rows() -> None:
    symbols = [SymbolRef(1, 10, "save", "method", "Model"), SymbolRef(2, 20, "save", "function"),
               SymbolRef(3, 30, "load", "function"), SymbolRef(4, 10, "Model", "class")]
    edges = [
        EdgeRow(100, 10, "call", "save", "Model"),  # own class
        EdgeRow(101, 20, "call", "save"),  # same file
        EdgeRow(102, 40, "call", "save"),  # two candidates elsewhere
        EdgeRow(103, 40, "call", "load"),  # unique, imported
        EdgeRow(104, 50, "call", "load"),  # unique, not imported
        EdgeRow(105, 40, "call", "print"),  # nothing
        EdgeRow(106, 40, "inherit", "Model"),
    ]
    resolved = resolve_edges(edges, symbols, {(40, "load")})
    assert resolved == [
        (100, 1, Resolution.SAME_FILE), (101, 2, Resolution.SAME_FILE), (102, None, Resolution.AMBIGUOUS),
        (103, 3, Resolution.IMPORT), (104, 3, Resolution.UNIQUE), (105, None, Resolution.EXTERNAL),
        (106, 4, Resolution.UNIQUE),
    ]


def test_cli_graph_commands(tmp_path: Path, cli) -> None:
    root = tmp_path / "python"
    shutil.copytree(FIXTURES / "python", root)
    callers = cli("callers", "format_name", str(root), "--json")
    assert callers.code == 0, callers.err
    payload = callers.json()
    assert payload["symbol"]["qualified_name"] == "format_name"
    assert [(c["from"]["qualified_name"], c["line"]) for c in payload["references"]] == [("Shape.describe", 8)]
    assert payload["references"][0]["location"] == "shapes.py:8"
    outline = cli("outline", "shapes.py", "--root", str(root))
    assert outline.code == 0 and outline.out.splitlines()[1].startswith("  7-8  method describe")
    found = cli("symbols", "formatname", str(root), "--json").json()["symbols"]
    assert found[0]["qualified_name"] == "format_name" and found[0]["location"].startswith("shapes.py:")
    partial = cli("symbols", "name format", str(root), "--json").json()["symbols"]
    assert partial[0]["qualified_name"] == "format_name"
    stats = cli("graph-stats", str(root))
    assert stats.code == 0 and "python call:" in stats.out
    impact = cli("impact", "square", str(root), "--depth", "1")
    assert impact.code == 0 and "area_of" in impact.out and "Square.area" not in impact.out
    callees = cli("callees", "format_name", str(root))
    assert callees.code == 0 and "call → upper  [external]" in callees.out  # unresolved edges are kept, marked
    refs = cli("refs", "Shape.name", str(root), "--json").json()
    assert [(r["kind"], r["from"]["qualified_name"]) for r in refs["references"]] == [("call", "Shape.describe")]
    assert cli("callers", "describe", str(root)).code == 1  # nobody calls it


def _resolved(index: Index) -> list[tuple[int, int | None, str]]:
    """Every edge's stored answer, to compare with what a whole re-resolution says."""
    rows = index.store._db.execute("SELECT id, target_id, resolution FROM edges ORDER BY id")  # type: ignore[attr-defined]
    return [(int(i), None if t is None else int(t), str(r)) for i, t, r in rows]


def _whole_resolution(index: Index) -> list[tuple[int, int | None, str]]:
    return sorted(resolve_edges(*index.store.resolution_inputs()))


@pytest.mark.parametrize("targeted", [False, True])
def test_re_resolving_only_what_a_change_touched_agrees_with_resolving_everything(
    tmp_path: Path, store_kind: str, targeted: bool
) -> None:
    root = write_tree(tmp_path / "repo", {
        "a.py": "def helper():\n    pass\n",
        "b.py": "def main():\n    helper()\n    util()\n",
        "c.py": "class Box:\n    def get(self):\n        return self.put()\n\n    def put(self):\n        pass\n",
        "pkg/d.py": "from a import helper\n\ndef run():\n    helper()\n    Box().get()\n",
    })
    steps: list[tuple[dict[str, str | None], Resolution | str]] = [
        # the same symbols, new ids: edges into them (d.py's Box) follow without being resolved again
        ({"c.py": "# moved down\nclass Box:\n    def get(self):\n        return self.put()\n\n    def put(self):\n        return 1\n"},
         Resolution.UNIQUE),
        ({"e.py": "def helper():\n    return 2\n"}, Resolution.AMBIGUOUS),  # a second helper
        ({"a.py": None}, Resolution.UNIQUE),  # the first one goes
        ({"b.py": "def helper():\n    pass\n\ndef main():\n    helper()\n    util()\n"}, Resolution.SAME_FILE),
        ({"e.py": None, "f.py": "def util():\n    pass\n"}, Resolution.SAME_FILE),  # a rename, and util appears
        ({"pkg": None}, Resolution.SAME_FILE),  # a whole folder goes
    ]
    with Index.open(root, settings=Settings.from_env()) as index:
        index.refresh(vectors=False)
        assert _resolved(index) == _whole_resolution(index)
        for files, main_helper in steps:
            for rel, text in files.items():
                target = root / rel
                if text is None:
                    shutil.rmtree(target) if target.is_dir() else target.unlink()
                else:
                    target.write_text(text)
            index.refresh(vectors=False, paths=list(files) if targeted else None)
            assert _resolved(index) == _whole_resolution(index), files
            _, callees = index.callees("main")
            assert {r.resolution for r in callees if r.target_name == "helper"} == {main_helper}
            if "pkg" not in files:
                _, run_calls = index.callees("run")
                box = [r.target for r in run_calls if r.target_name == "Box"]
                assert box and box[0] is not None and box[0].start_line == 2  # the moved class, not a stale id


def test_a_whole_resolution_in_small_batches_gives_the_answers_of_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Edges are read page by page and resolved batch by batch (the kernel has 4.9 M): pages and
    batches that split the edges anywhere change no answer."""
    import codewhere.graph
    import codewhere.store.sqlite.schema

    files = {f"m{i}.py": f"def f{i}():\n    f{i - 1}()\n    g()\n    print()\n" for i in range(1, 8)}
    files["g.py"] = "def g():\n    pass\n"
    files["h.py"] = "def g():\n    pass\n"
    root = write_tree(tmp_path / "repo", files)
    with Index.open(root, settings=Settings.from_env()) as index:
        index.refresh(vectors=False)
        once = _resolved(index)
        assert len(once) >= 20 and {r for _, _, r in once} >= {Resolution.UNIQUE, Resolution.AMBIGUOUS}
        index.store._db.execute("UPDATE edge_rows SET target_id = NULL, resolution = 0")  # type: ignore[attr-defined]
        monkeypatch.setattr(codewhere.graph, "RESOLVE_BATCH", 3)
        monkeypatch.setattr(codewhere.store.sqlite.schema, "EDGE_PAGE", 2)
        codewhere.graph.refresh_resolution(index.store)  # type: ignore[arg-type]
        assert _resolved(index) == once
