"""Which names a piece of source defines, by regular expression over single lines.

A stopgap that needs no grammar: it lets a raw identifier find its definition in any language.
Tree-sitter symbols (parse/) take over where a grammar exists; this stays for the rest.
"""

from __future__ import annotations

import re

_KEYWORDS = frozenset(
    "if for while switch catch return sizeof new else do try with match elif except function case".split()
)

_MODIFIERS = (
    r"(?:(?:export|default|pub(?:\([^)]*\))?|public|private|protected|internal|static|final|abstract"
    r"|sealed|open|async|unsafe|extern|inline|virtual|override|data|case|partial|const|declare)\s+)*"
)
_NAME = r"([A-Za-z_$][\w$]*[?!]?)"

_KEYWORD_DEF = re.compile(
    r"\s*" + _MODIFIERS + r"(?:def|class|fn|func|fun|function\*?|struct|trait|interface|enum|module|object"
    r"|record|protocol|extension|type|union|impl|mod|namespace|macro_rules!)\s+(?:self\.|\([^)]*\)\s*)?" + _NAME
)
_JS_ASSIGNED = re.compile(
    r"\s*(?:export\s+)?(?:const|let|var)\s+" + _NAME
    + r"\s*(?::[^=]*)?=\s*(?:async\s+)?(?:function|class|\(|[A-Za-z_$][\w$]*\s*=>)"
)
_JS_METHOD = re.compile(r"\s+(?:async\s+|static\s+|get\s+|set\s+)*" + _NAME + r"\s*\([^()]*\)\s*\{")
# A return type, then NAME( ... ) and an opening brace or the end of the line (C, C++, Java, C#).
_TYPED_FUNCTION = re.compile(r"\s*(?:[\w:<>,*&\[\]]+\s+)+?[*&]*([A-Za-z_]\w*)\s*\([^;{}]*\)[^;{}]*(?:\{\s*)?$")
_SHELL_FUNCTION = re.compile(r"\s*(?:function\s+)?([A-Za-z_][\w\-]*)\s*\(\)\s*\{?")
_C_DEFINE = re.compile(r"\s*#\s*define\s+([A-Za-z_]\w*)")

# Languages without a grammar here: a qualified module name defines its last segment
# (`defmodule Ecto.Query` defines `Query`, `function M.setup(` defines `setup`).
_ELIXIR_MODULE = re.compile(r"\s*(?:defmodule|defprotocol)\s+(?:[A-Z]\w*\.)*([A-Z]\w*)")
_ELIXIR_FUNCTION = re.compile(
    r"\s*(?:def|defp|defmacro|defmacrop|defguard|defguardp|defdelegate|defn|defnp)\s+([a-z_]\w*[?!]?)"
)
_HASKELL_TYPE = re.compile(
    r"(?:data|newtype|type|data\s+family|type\s+family|module|class(?:\s+.*=>)?)\s+(?:[A-Z][\w']*\.)*([A-Z][\w']*)"
)
_HASKELL_SIGNATURE = re.compile(r"([a-z_][\w']*)\s*::")  # top level only: no indentation
_LUA_FUNCTION = re.compile(r"\s*(?:local\s+)?function\s+(?:[\w.]+[.:])?([A-Za-z_]\w*)\s*\(")
_LUA_ASSIGNED = re.compile(r"\s*(?:local\s+)?(?:[\w.]+\.)?([A-Za-z_]\w*)\s*=\s*function\b")
_ZIG_FUNCTION = re.compile(r"\s*(?:pub\s+)?(?:export\s+|extern\s+|inline\s+)?fn\s+([A-Za-z_]\w*)")
_ZIG_TYPE = re.compile(
    r"\s*(?:pub\s+)?const\s+([A-Za-z_]\w*)\s*(?::[^=]*)?=\s*(?:extern\s+|packed\s+)?(?:struct|enum|union|opaque)\b"
)

_PERL_DEF = re.compile(r"\s*(?:sub\s+([A-Za-z_]\w*)|package\s+(?:\w+::)*(\w+))")
_R_FUNCTION = re.compile(r"\s*([A-Za-z_.][\w.]*)\s*(?:<-|=)\s*function\b")
_CLOJURE_DEF = re.compile(
    r"\s*\((?:defn-?|defmacro|defmulti|defprotocol|defrecord|deftype|definterface|defonce|def)\s+"
    r"(?:\^\S+\s+)?([A-Za-z_*+!?<>=-][\w*+!?<>=-]*)"
)
_JULIA_DEF = re.compile(
    r"\s*(?:function|macro|module|baremodule|(?:mutable\s+)?struct|abstract\s+type|primitive\s+type)\s+"
    r"(?:[A-Z]\w*\.)*([A-Za-z_]\w*!?)"
)
_JULIA_SHORT_FUNCTION = re.compile(r"([A-Za-z_]\w*!?)\([^()]*\)\s*=[^=]")  # `area(r) = pi * r^2`, top level
_OCAML_VALUE = re.compile(r"\s*(?:let(?:\s+rec)?|and|val|external)\s+([a-z_][\w']*)")
_OCAML_TYPE = re.compile(r"\s*(?:type|module(?:\s+type)?|class)\s+(?:nonrec\s+)?(?:'\w+\s+|\([^)]*\)\s+)?([A-Za-z_][\w']*)")
_ERLANG_DEF = re.compile(r"(?:-(?:module|record|type)\(([a-z]\w*)|([a-z]\w*)\(.*\)\s*(?:when\s.*)?->)")

_BY_LANGUAGE: dict[str, tuple[re.Pattern[str], ...]] = {
    "elixir": (_ELIXIR_MODULE, _ELIXIR_FUNCTION),
    "haskell": (_HASKELL_TYPE, _HASKELL_SIGNATURE),
    "lua": (_LUA_FUNCTION, _LUA_ASSIGNED),
    "zig": (_ZIG_FUNCTION, _ZIG_TYPE),
    "perl": (_PERL_DEF,),
    "r": (_R_FUNCTION,),
    "clojure": (_CLOJURE_DEF,),
    "julia": (_JULIA_DEF, _JULIA_SHORT_FUNCTION),
    "ocaml": (_OCAML_VALUE, _OCAML_TYPE),
    "erlang": (_ERLANG_DEF,),
    "python": (_KEYWORD_DEF,),
    "cython": (_KEYWORD_DEF,),
    "ruby": (_KEYWORD_DEF,),
    "go": (_KEYWORD_DEF,),
    "rust": (_KEYWORD_DEF,),
    "javascript": (_KEYWORD_DEF, _JS_ASSIGNED, _JS_METHOD),
    "typescript": (_KEYWORD_DEF, _JS_ASSIGNED, _JS_METHOD),
    "tsx": (_KEYWORD_DEF, _JS_ASSIGNED, _JS_METHOD),
    "c": (_KEYWORD_DEF, _TYPED_FUNCTION, _C_DEFINE),
    "cpp": (_KEYWORD_DEF, _TYPED_FUNCTION, _C_DEFINE),
    "objc": (_KEYWORD_DEF, _TYPED_FUNCTION, _C_DEFINE),
    "bash": (_SHELL_FUNCTION,),
    "markdown": (), "rst": (), "text": (), "json": (), "yaml": (), "toml": (), "xml": (), "html": (),
    "css": (), "ini": (),
}
_ANY_LANGUAGE = (_KEYWORD_DEF, _JS_ASSIGNED, _TYPED_FUNCTION, _SHELL_FUNCTION, _C_DEFINE)
MAX_LINE_CHARS = 500  # longer lines are data or minified code, not definitions


def find_definitions(text: str, language: str = "") -> list[tuple[int, str]]:
    """(1-based line, name as written) of each definition found, in line order."""
    patterns = _BY_LANGUAGE.get(language, _ANY_LANGUAGE)
    if not patterns:
        return []
    found: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line) > MAX_LINE_CHARS or not line.strip():
            continue
        for pattern in patterns:
            match = pattern.match(line)
            name = match and next((g for g in match.groups() if g), None)
            if name and name not in _KEYWORDS:
                found.append((number, name.rstrip("?!")))
                break
    return found
