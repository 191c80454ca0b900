"""Facts about file names: language by extension, and kind (code/test/docs/config) by path."""

from __future__ import annotations

import functools
import re

from codewhere.types import FileKind

# extension → language. Languages with tree-sitter grammars are added as rows in the graph issue.
LANGUAGE_BY_EXTENSION: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyx": "cython",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".kts": "kotlin",
    ".scala": "scala", ".sc": "scala", ".swift": "swift", ".cs": "csharp",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp",
    ".hh": "cpp", ".hxx": "cpp", ".inl": "cpp", ".m": "objc", ".mm": "objc",
    ".rb": "ruby", ".php": "php", ".sh": "bash", ".bash": "bash", ".zsh": "bash",
    ".bats": "bash", ".lua": "lua", ".pl": "perl", ".pm": "perl", ".r": "r",
    ".hs": "haskell", ".ml": "ocaml", ".mli": "ocaml", ".ex": "elixir", ".exs": "elixir",
    ".erl": "erlang", ".clj": "clojure", ".dart": "dart", ".jl": "julia", ".zig": "zig",
    ".vue": "vue", ".svelte": "svelte", ".sql": "sql", ".html": "html", ".htm": "html",
    ".css": "css", ".scss": "scss", ".sass": "sass", ".less": "less",
    ".md": "markdown", ".markdown": "markdown", ".mdx": "markdown", ".rst": "rst",
    ".txt": "text", ".adoc": "asciidoc",
    ".json": "json", ".jsonc": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml",
    ".ini": "ini", ".cfg": "ini", ".xml": "xml", ".gradle": "groovy", ".groovy": "groovy",
    ".proto": "protobuf", ".graphql": "graphql", ".tf": "hcl", ".cmake": "cmake", ".bzl": "starlark",
    ".po": "gettext", ".pot": "gettext", ".strings": "strings", ".xlf": "xml", ".xliff": "xml", ".resx": "xml",
}
# translation catalogs: configuration by their languages above, and a kind-prior of their own
# (search/ranking/penalties.py) unless a question asks about translations
TRANSLATION_CATALOGS = (".po", ".pot", ".strings", ".xliff", ".xlf", ".resx")

LANGUAGE_BY_FILENAME: dict[str, str] = {
    "Makefile": "make", "makefile": "make", "GNUmakefile": "make", "Dockerfile": "dockerfile",
    "CMakeLists.txt": "cmake", "Rakefile": "ruby", "Gemfile": "ruby", "BUILD": "starlark",
    "BUILD.bazel": "starlark", "WORKSPACE": "starlark", "WORKSPACE.bazel": "starlark", "MODULE.bazel": "starlark",
}

DOCS_LANGUAGES = frozenset({"markdown", "rst", "text", "asciidoc"})
# build descriptions (CMake, Bazel) are configuration too: they name every source file and so
# match questions about the code they build
# translation catalogs (gettext) step back with configuration: they hold every user-facing string
# of the code in each language, so a question in words finds Django's 3,752 `.po` chunks first
CONFIG_LANGUAGES = frozenset({"json", "yaml", "toml", "ini", "xml", "cmake", "starlark", "gettext", "strings"})

# Whole file names that are documentation whatever their extension.
_DOCS_NAME = re.compile(
    r"^(README|CHANGELOG|CHANGES|HISTORY|NEWS|AUTHORS|CONTRIBUTORS|CONTRIBUTING|LICENSE|LICENCE"
    r"|COPYING|NOTICE|CODE_OF_CONDUCT|SECURITY|UPGRADING|MIGRATION)([._-].*)?$",
    re.IGNORECASE,
)
_DOCS_DIRS = frozenset({"docs", "doc", "documentation", "_docs", "man", "wiki"})
_TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs", "testdata", "e2e"})
_TEST_FILE = re.compile(
    r"(^test_.*\.py$|.*_test\.py$|^conftest\.py$"  # Python
    r"|.*\.(test|spec)\.[cm]?[jt]sx?$"  # JS/TS
    r"|.*_test\.go$"  # Go
    r"|.*Tests?\.(java|kt|scala|cs|swift)$|.*Spec\.(scala|kt|groovy)$"  # JVM, .NET, Swift
    r"|.*_spec\.rb$|.*_test\.rb$"  # Ruby
    r"|.*Test\.php$"  # PHP
    r"|.*_(unit)?tests?\.(c|cc|cpp|cxx)$|^test_.*\.(c|cc|cpp|cxx)$"  # C, C++ (GoogleTest: `_test.cc`)
    r"|.*_(spec|test)\.lua$|^test_.*\.lua$|.*_test\.(dart|exs)$|.*Spec\.hs$)"  # Lua, Dart, Elixir, Haskell
)
_CONFIG_NAMES = frozenset({
    "Makefile", "makefile", "GNUmakefile", "Dockerfile", "setup.cfg", "tox.ini", ".editorconfig",
    ".gitignore", ".gitattributes", ".codewhereignore", ".coveragerc", "MANIFEST.in",
    "build.gradle", "settings.gradle", "build.gradle.kts", "settings.gradle.kts", "meson.build",
    "configure.ac", "Makefile.am", "Makefile.in", "SConstruct", "BUCK",
})

LOCKFILES = frozenset({
    "package-lock.json", "npm-shrinkwrap.json", "pnpm-lock.yaml", "yarn.lock", "bun.lockb",
    "bun.lock", "Cargo.lock", "poetry.lock", "Pipfile.lock", "uv.lock", "pdm.lock",
    "Gemfile.lock", "composer.lock", "go.sum", "mix.lock", "pubspec.lock", "Podfile.lock",
    "packages.lock.json", "flake.lock", "gradle.lockfile", "conda-lock.yml",
})

# Media and archives: not source even when they hold no NUL byte (SVG, Illustrator, PDF).
ASSET_EXTENSIONS = frozenset({
    ".svg", ".ai", ".eps", ".psd", ".pdf", ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico",
    ".webp", ".tif", ".tiff", ".mp3", ".mp4", ".wav", ".ogg", ".webm", ".mov", ".avi",
    ".woff", ".woff2", ".ttf", ".otf", ".eot", ".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z",
    ".tar", ".jar", ".whl", ".so", ".dylib", ".dll", ".exe", ".o", ".a", ".pyc", ".class",
    ".wasm", ".sqlite", ".db", ".pkl", ".npy", ".npz", ".onnx", ".safetensors", ".bin", ".mo",
})

# Minified bundles and source maps, by name (skipped unless index.include_minified); a file whose
# lines average over 300 characters is caught by its content (scan.looks_minified).
MINIFIED_SUFFIXES = (".min.js", ".min.mjs", ".min.cjs", ".min.css", ".js.map", ".css.map", ".map")

# Folders never worth indexing: dependencies, build output, tool caches, VCS metadata.
SKIPPED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", "bower_components", "dist", "build", "out", "target",
    ".venv", "venv", ".env", "env", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".tox", ".nox", ".eggs", ".gradle", ".idea", ".next", ".nuxt", ".svelte-kit", ".turbo",
    ".cache", ".parcel-cache", "coverage", "htmlcov", ".terraform", ".serverless", "Pods",
    ".dart_tool", ".pnpm-store", ".yarn", "site-packages",
})


def _parts(path: str) -> list[str]:
    """A relative POSIX path's folders and name, as PurePosixPath splits them (string work only:
    the freshness check classifies every file of the tree on every refresh)."""
    return [part for part in path.split("/") if part and part != "."]


def _suffix(name: str) -> str:
    """PurePosixPath's suffix: `.py`; none for `.bashrc` or `name.`."""
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


def _split(path: str) -> tuple[str, str]:
    """The folder and the name, as `_parts` would give them, without splitting the whole path."""
    folder, _, name = path.rpartition("/")
    if name and name != ".":
        return folder, name
    parts = _parts(path) or [""]
    return "/".join(parts[:-1]), parts[-1]


def language_of(path: str) -> str:
    name = _split(path)[1]
    if name in LANGUAGE_BY_FILENAME:
        return LANGUAGE_BY_FILENAME[name]
    return LANGUAGE_BY_EXTENSION.get(_suffix(name).lower(), "")


@functools.lru_cache(maxsize=4096)
def _folder_kinds(folder: str) -> tuple[bool, bool]:
    """Whether a folder path lies in a test folder, and in a docs folder. Cached: a walk asks
    for every file of a folder in a row, and splitting each whole path again was a third of
    classifying the Linux kernel's 78 k files."""
    dirs = {part.lower() for part in _parts(folder)}
    return bool(dirs & _TEST_DIRS), bool(dirs & _DOCS_DIRS)


def kind_of(path: str, language: str) -> FileKind:
    """Test before docs before config: `tests/README.md` is about tests, `docs/conf.py` is docs."""
    folder, name = _split(path)
    in_test_dir, in_any_docs_dir = _folder_kinds(folder)
    if in_test_dir or _TEST_FILE.match(name):
        return FileKind.TEST
    # Go keeps no documentation sources: a `doc/` folder of .go files is a package (cobra/doc)
    in_docs_dir = in_any_docs_dir and language != "go"
    # a source file is never docs by its name alone: alembic's runtime/migration.py is code
    docs_by_name = _DOCS_NAME.match(name) is not None and (not language or language in DOCS_LANGUAGES)
    if in_docs_dir or language in DOCS_LANGUAGES or docs_by_name:
        return FileKind.DOCS
    if language in CONFIG_LANGUAGES or name in _CONFIG_NAMES or (not language and name.startswith(".")):
        return FileKind.CONFIG
    return FileKind.CODE
