"""One row per language: the grammar wheel that parses it and the query file that reads it.

Adding a language is adding a row here, an extension in languages.py and a queries/<name>.scm
with the capture names parser.py understands (@def.<kind> + @name, @call + @callee,
@import + @imported, @inherit + @base).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Grammar:
    module: str  # the pinned PyPI grammar wheel's import name
    function: str  # the function returning its language pointer
    query: str  # file name under queries/


GRAMMARS: dict[str, Grammar] = {
    "python": Grammar("tree_sitter_python", "language", "python.scm"),
    "javascript": Grammar("tree_sitter_javascript", "language", "javascript.scm"),
    "typescript": Grammar("tree_sitter_typescript", "language_typescript", "typescript.scm"),
    "tsx": Grammar("tree_sitter_typescript", "language_tsx", "typescript.scm"),  # TSX extends TypeScript
    "go": Grammar("tree_sitter_go", "language", "go.scm"),
    "rust": Grammar("tree_sitter_rust", "language", "rust.scm"),
    "java": Grammar("tree_sitter_java", "language", "java.scm"),
    "c": Grammar("tree_sitter_c", "language", "c.scm"),
    "cpp": Grammar("tree_sitter_cpp", "language", "cpp.scm"),
    "csharp": Grammar("tree_sitter_c_sharp", "language", "csharp.scm"),
    "ruby": Grammar("tree_sitter_ruby", "language", "ruby.scm"),
    "php": Grammar("tree_sitter_php", "language_php", "php.scm"),
    "kotlin": Grammar("tree_sitter_kotlin", "language", "kotlin.scm"),
    "swift": Grammar("tree_sitter_swift", "language", "swift.scm"),
    "scala": Grammar("tree_sitter_scala", "language", "scala.scm"),
    "bash": Grammar("tree_sitter_bash", "language", "bash.scm"),
}

# Kinds that hold members: a function inside one is a method, and its qualified name is Owner.name.
CONTAINER_KINDS = frozenset({"class", "struct", "interface", "trait", "enum", "impl", "module", "type"})
# Containers that name a scope without being a symbol of their own (Rust `impl Foo`).
SCOPE_ONLY_KINDS = frozenset({"impl"})
CALLABLE_KINDS = frozenset({"function", "method"})
