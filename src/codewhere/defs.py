"""Which names a piece of source defines, by regular expression.

A stopgap that needs no grammar: it lets a raw identifier find its definition in any language.
Tree-sitter symbols (parse/) take over where a grammar exists; this stays for the rest.
"""

from __future__ import annotations

import re

from codewhere.tokens import compound

_KEYWORDS = frozenset(
    "if for while switch catch return sizeof new else do try with match elif except function".split()
)

_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.MULTILINE)
    for p in (
        # def / class / fn / func / fun / struct / trait / interface / enum / module ... NAME
        r"^\s*(?:(?:export|default|pub(?:\([^)]*\))?|public|private|protected|internal|static|final"
        r"|abstract|sealed|open|async|unsafe|extern|inline|virtual|override|data|case|partial)\s+)*"
        r"(?:def|class|fn|func|fun|function\*?|struct|trait|interface|enum|module|object|record|protocol"
        r"|extension|type|union|impl|mod|namespace|macro_rules!)\s+(?:self\.|\([^)]*\)\s*)?([A-Za-z_$][\w$]*[?!]?)",
        # const NAME = (...) => / function / class   (JS/TS)
        r"^\s*(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::[^=]*)?=\s*(?:async\s+)?(?:function|class|\(|[A-Za-z_$][\w$]*\s*=>)",
        # C, C++, Java, C# functions and methods: a type, then NAME( at line start, no `;` before `{`
        r"^[ \t]*(?:[\w:<>,\*&\[\]]+[ \t]+)+\**([A-Za-z_]\w*)[ \t]*\([^;{}]*\)[^;{}]*\{",
        # shell: name() {   and   #define NAME
        r"^\s*([A-Za-z_][\w\-]*)\s*\(\)\s*\{",
        r"^\s*#\s*define\s+([A-Za-z_]\w*)",
    )
)


def find_definitions(text: str) -> list[tuple[int, str]]:
    """(1-based line, compound name) of each definition found."""
    found: dict[tuple[int, str], None] = {}
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            name = match.group(1)
            if name in _KEYWORDS:
                continue
            line = text.count("\n", 0, match.start(1)) + 1
            found[(line, compound(name.rstrip("?!")))] = None
    return sorted(found)
