"""Compiler-grade answers for the code graph: where each reference's definition really is.

Each source turns what it knows into `graph.PreciseAnswer`s (a name at `path:line` → the
definition's `path:line`), which `graph.apply_precise` merges into the edges name resolution
made: `scip` reads a SCIP index another tool wrote, `jedi_pass` asks jedi about Python call sites
in-process, `lsp` asks an installed language server.
"""
