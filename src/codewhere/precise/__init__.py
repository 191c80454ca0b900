"""Compiler-grade answers for the code graph: where each reference's definition really is.

Each source turns what it knows into `graph.PreciseAnswer`s (a name at `path:line` → the
definition's `path:line`), which `graph.apply_precise` merges into the edges name resolution
made: `scip` reads a SCIP index another tool wrote, `jedi_pass` asks jedi about Python call sites
in-process, `lsp` asks an installed language server.

The passes (passes.py) load only when a run asks for one: a plain search imports none of them.
"""

# what the passes keep in the index's meta (passes.py): kept out of `codewhere status`
SCIP_STAMP = "precise_scip_stamp"
JEDI_FILES = "precise_jedi_files"
LSP_FILES = "precise_lsp_files"
HIDDEN_META = frozenset({SCIP_STAMP, JEDI_FILES, LSP_FILES})
