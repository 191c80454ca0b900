from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codewhere import languages as lang
from codewhere import scan as scan_module
from codewhere.languages import kind_of, language_of
from codewhere.scan import ScanOptions, read_source, scan
from codewhere.types import FileKind, FileRecord, Skip, SkipReason
from tests.conftest import write_tree


def outcome(root: Path, options: ScanOptions = ScanOptions()) -> tuple[set[str], dict[str, SkipReason]]:
    kept, skipped = set(), {}
    for item in scan(root, options):
        if isinstance(item, FileRecord):
            kept.add(item.path)
        else:
            assert isinstance(item, Skip)
            skipped[item.path] = item.reason
    return kept, skipped


def test_gitignore_at_root_and_nested_levels_with_negation(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        ".git/HEAD": "ref: refs/heads/main\n",
        ".gitignore": "*.log\ngenerated/\n",
        "app.py": "x = 1\n", "debug.log": "noise\n", "generated/out.py": "y = 2\n",
        "pkg/.gitignore": "secret.py\n!keep.log\n",
        "pkg/secret.py": "z = 3\n", "pkg/keep.log": "kept\n", "pkg/mod.py": "w = 4\n",
        "other/secret.py": "not ignored here\n",
    })
    kept, skipped = outcome(tmp_path)
    assert kept == {".gitignore", "app.py", "pkg/.gitignore", "pkg/keep.log", "pkg/mod.py", "other/secret.py"}
    assert skipped["debug.log"] is SkipReason.IGNORED
    assert skipped["generated/"] is SkipReason.IGNORED
    assert skipped["pkg/secret.py"] is SkipReason.IGNORED


def test_codewhereignore_uses_gitignore_syntax(tmp_path: Path) -> None:
    write_tree(tmp_path, {".codewhereignore": "fixtures/\n*.snap\n", "a.py": "", "fixtures/big.py": "", "b.snap": "",
                          "deep/er/.codewhereignore": "local.py\n", "deep/er/local.py": "", "deep/local.py": ""})
    kept, skipped = outcome(tmp_path)
    assert kept == {".codewhereignore", "a.py", "deep/er/.codewhereignore", "deep/local.py"}
    assert skipped == {"fixtures/": SkipReason.IGNORED, "b.snap": SkipReason.IGNORED, "deep/er/local.py": SkipReason.IGNORED}


def test_git_info_exclude_is_honoured(tmp_path: Path) -> None:
    write_tree(tmp_path, {".git/info/exclude": "local.py\n", "local.py": "", "main.py": ""})
    kept, skipped = outcome(tmp_path)
    assert kept == {"main.py"}
    assert skipped[".git/"] is SkipReason.BUILTIN_DIR


@pytest.mark.parametrize("folder", ["node_modules", "dist", "build", ".git", ".venv", "__pycache__", "target"])
def test_builtin_folders_are_skipped_without_walking_them(tmp_path: Path, folder: str) -> None:
    write_tree(tmp_path, {f"{folder}/deep/x.js": "x", "keep.js": "y"})
    kept, skipped = outcome(tmp_path)
    assert kept == {"keep.js"}
    assert skipped == {f"{folder}/": SkipReason.BUILTIN_DIR}


@pytest.mark.parametrize("name", ["package-lock.json", "pnpm-lock.yaml", "yarn.lock", "Cargo.lock", "poetry.lock", "go.sum"])
def test_lockfiles_are_skipped_by_full_name(tmp_path: Path, name: str) -> None:
    write_tree(tmp_path, {f"sub/{name}": "{}", "sub/lock.json": "{}"})
    kept, skipped = outcome(tmp_path)
    assert kept == {"sub/lock.json"}
    assert skipped == {f"sub/{name}": SkipReason.LOCKFILE}


def test_files_over_one_megabyte_are_skipped(tmp_path: Path) -> None:
    write_tree(tmp_path, {"big.py": "x" * 1_000_001, "edge.py": "x" * 1_000_000})
    kept, skipped = outcome(tmp_path)
    assert kept == {"edge.py"}
    assert skipped == {"big.py": SkipReason.TOO_LARGE}


def test_media_files_are_assets_even_without_nul_bytes(tmp_path: Path) -> None:
    write_tree(tmp_path, {"logo.svg": "<svg></svg>", "pic.PNG": b"\x89PNG\r\n\x1a\n\0\0", "a.py": ""})
    _, skipped = outcome(tmp_path)
    assert skipped == {"logo.svg": SkipReason.ASSET, "pic.PNG": SkipReason.ASSET}


def test_nul_byte_in_first_512_bytes_means_binary(tmp_path: Path) -> None:
    write_tree(tmp_path, {"blob.dat": b"abc\0def", "late.txt": b"a" * 600 + b"\0"})
    assert read_source(tmp_path, "blob.dat") is SkipReason.BINARY
    source = read_source(tmp_path, "late.txt")
    assert isinstance(source, tuple)


def test_invalid_utf8_is_decoded_with_replacement(tmp_path: Path) -> None:
    (tmp_path / "latin.py").write_bytes(b"name = 'caf\xe9'\n")
    data, text = read_source(tmp_path, "latin.py")  # type: ignore[misc]
    assert text == "name = 'caf\ufffd'\n"
    assert data == b"name = 'caf\xe9'\n"


def test_symlinks_outside_root_looping_broken_and_duplicate_are_skipped(tmp_path: Path) -> None:
    outside = write_tree(tmp_path / "outside", {"secret.py": "s = 1\n"})
    root = write_tree(tmp_path / "root", {"pkg/real.py": "r = 1\n"})
    os.symlink(outside / "secret.py", root / "escape.py")
    os.symlink(outside, root / "escape_dir")
    os.symlink(root / "pkg", root / "pkg" / "loop")
    os.symlink(root / "missing.py", root / "dangling.py")
    os.symlink(root / "pkg" / "real.py", root / "alias.py")
    os.symlink(root / "self_a", root / "self_b")
    os.symlink(root / "self_b", root / "self_a")
    kept, skipped = outcome(root)
    assert kept == {"pkg/real.py"}
    assert skipped == {
        "escape.py": SkipReason.SYMLINK_OUTSIDE_ROOT,
        "escape_dir": SkipReason.SYMLINK_OUTSIDE_ROOT,
        "pkg/loop": SkipReason.SYMLINK_LOOP,
        "dangling.py": SkipReason.BROKEN_SYMLINK,
        "alias.py": SkipReason.SYMLINK_DUPLICATE,
        "self_a": SkipReason.SYMLINK_LOOP,
        "self_b": SkipReason.SYMLINK_LOOP,
    }


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_folder_is_counted_not_fatal(tmp_path: Path) -> None:
    write_tree(tmp_path, {"locked/a.py": "", "b.py": ""})
    (tmp_path / "locked").chmod(0)
    try:
        kept, skipped = outcome(tmp_path)
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert kept == {"b.py"}
    assert skipped == {"locked/": SkipReason.UNREADABLE}


def test_unreadable_file_is_a_skip(tmp_path: Path) -> None:
    assert read_source(tmp_path, "gone.py") is SkipReason.UNREADABLE


def test_fifo_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    _, skipped = outcome(tmp_path)
    assert skipped == {"pipe": SkipReason.NOT_REGULAR}


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("src/requests/models.py", FileKind.CODE),
        ("tests/test_models.py", FileKind.TEST),
        ("pkg/test_utils.py", FileKind.TEST),
        ("pkg/utils_test.py", FileKind.TEST),
        ("conftest.py", FileKind.TEST),
        ("web/app.spec.ts", FileKind.TEST),
        ("web/app.test.jsx", FileKind.TEST),
        ("web/__tests__/app.js", FileKind.TEST),
        ("server/handler_test.go", FileKind.TEST),
        ("src/test/java/com/x/FooTest.java", FileKind.TEST),
        ("src/main/java/com/x/FooTests.java", FileKind.TEST),
        ("src/main/java/com/x/Foo.java", FileKind.CODE),
        ("crate/tests/integration.rs", FileKind.TEST),
        ("crate/src/lib.rs", FileKind.CODE),
        ("spec/models/user_spec.rb", FileKind.TEST),
        ("absl/container/flat_hash_map_test.cc", FileKind.TEST),
        ("src/format_unittest.cpp", FileKind.TEST),
        ("src/test_util.c", FileKind.TEST),
        ("src/contest.cc", FileKind.CODE),
        ("absl/container/flat_hash_map.h", FileKind.CODE),
        ("lua/telescope/finders_spec.lua", FileKind.TEST),
        ("lib/widget_test.dart", FileKind.TEST),
        ("src/ParserSpec.hs", FileKind.TEST),
        ("docs/conf.py", FileKind.DOCS),
        ("doc/man_docs.go", FileKind.CODE),
        ("doc/README.md", FileKind.DOCS),
        ("docs/index.rst", FileKind.DOCS),
        ("README.md", FileKind.DOCS),
        ("HISTORY.md", FileKind.DOCS),
        ("CHANGELOG", FileKind.DOCS),
        ("CHANGELOG.rst", FileKind.DOCS),
        ("LICENSE", FileKind.DOCS),
        ("CHANGES.txt", FileKind.DOCS),
        ("SECURITY", FileKind.DOCS),
        # a source file is never docs by its name alone (issue 52): alembic's runtime/migration.py
        ("alembic/runtime/migration.py", FileKind.CODE),
        ("src/history.ts", FileKind.CODE),
        ("pkg/changes.go", FileKind.CODE),
        ("lib/security.rb", FileKind.CODE),
        ("notes.txt", FileKind.DOCS),
        ("pyproject.toml", FileKind.CONFIG),
        ("package.json", FileKind.CONFIG),
        (".github/workflows/ci.yml", FileKind.CONFIG),
        ("Makefile", FileKind.CONFIG),
        ("setup.cfg", FileKind.CONFIG),
        (".coveragerc", FileKind.CONFIG),
        ("absl/types/CMakeLists.txt", FileKind.CONFIG),
        ("absl/types/BUILD.bazel", FileKind.CONFIG),
        ("tools/defs.bzl", FileKind.CONFIG),
        ("app/build.gradle.kts", FileKind.CONFIG),
        ("app/src/main/Main.kts", FileKind.CODE),
        # translation catalogs are not code (issue 52: Django's .po files led "enter a valid email address")
        ("django/conf/locale/de/LC_MESSAGES/django.po", FileKind.CONFIG),
        ("locale/messages.pot", FileKind.CONFIG),
        ("Resources/Strings.resx", FileKind.CONFIG),
        ("App/en.lproj/Localizable.strings", FileKind.CONFIG),
    ],
)
def test_kind_rules_cover_common_layouts(path: str, kind: FileKind) -> None:
    assert kind_of(path, language_of(path)) is kind


@pytest.mark.parametrize(
    ("path", "language"),
    [("a.py", "python"), ("a.tsx", "tsx"), ("a.ts", "typescript"), ("a.go", "go"), ("a.rs", "rust"),
     ("A.java", "java"), ("Makefile", "make"), ("a.unknownext", ""), ("a.H", "c")],
)
def test_language_from_extension_or_name(path: str, language: str) -> None:
    assert language_of(path) == language


# ---- ignore files outside git, bad patterns, minified files, UTF-16 --------------------------


def test_gitignore_outside_a_git_repository_is_not_applied_unless_asked(tmp_path: Path) -> None:
    # Debian's linux-source tarball ships a packaging .gitignore that ends with `/*`
    write_tree(tmp_path, {".gitignore": "/*\n", "kernel/fork.c": "int fork(void);\n", ".ignore": "scratch.c\n",
                          "scratch.c": "int x;\n"})
    kept, skipped = outcome(tmp_path)
    assert kept == {".gitignore", ".ignore", "kernel/fork.c"}
    assert skipped == {"scratch.c": SkipReason.IGNORED}  # .ignore applies everywhere
    kept, _ = outcome(tmp_path, ScanOptions(gitignore="always"))
    assert kept == set()
    (tmp_path / ".git").mkdir()
    kept, _ = outcome(tmp_path)
    assert kept == set()
    kept, _ = outcome(tmp_path, ScanOptions(gitignore="never"))
    assert kept == {".gitignore", ".ignore", "kernel/fork.c"}


def test_a_repository_nested_in_a_plain_folder_uses_its_gitignore(tmp_path: Path) -> None:
    write_tree(tmp_path, {"vendor/lib/.git/HEAD": "x\n", "vendor/lib/.gitignore": "gen.py\n", "vendor/lib/gen.py": "",
                          "vendor/lib/main.py": "", ".gitignore": "*.py\n", "top.py": ""})
    kept, skipped = outcome(tmp_path)
    assert "top.py" in kept and "vendor/lib/main.py" in kept
    assert skipped["vendor/lib/gen.py"] is SkipReason.IGNORED


def test_an_invalid_ignore_line_is_skipped_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # psf/black's test fixtures ship a .gitignore with a lone `!`
    write_tree(tmp_path, {".git/HEAD": "x\n", ".gitignore": "!\n*.log\n", "a.py": "", "b.log": ""})
    kept, skipped = outcome(tmp_path)
    assert kept == {".gitignore", "a.py"} and skipped["b.log"] is SkipReason.IGNORED
    outcome(tmp_path)
    warnings = [r.getMessage() for r in caplog.records if "not a valid ignore pattern" in r.getMessage()]
    assert len(warnings) == 1 and ".gitignore line 1" in warnings[0]


def test_an_ignored_skip_names_the_file_line_and_pattern(tmp_path: Path) -> None:
    write_tree(tmp_path, {".codewhereignore": "# notes\n*.tmp\n", "a.tmp": ""})
    (skip,) = [i for i in scan(tmp_path) if isinstance(i, Skip)]
    assert skip.detail == f"{tmp_path / '.codewhereignore'} line 2 `*.tmp`"


def test_minified_files_are_skipped_by_name_and_by_content(tmp_path: Path) -> None:
    long_line = "function f(a){return a}" * 400
    write_tree(tmp_path, {"app.min.js": "x", "app.js.map": "{}", "bundle.js": long_line, "ok.js": "let a = 1;\n"})
    kept, skipped = outcome(tmp_path)
    assert skipped == {"app.min.js": SkipReason.MINIFIED, "app.js.map": SkipReason.MINIFIED}
    assert read_source(tmp_path, "bundle.js", include_minified=False) is SkipReason.MINIFIED
    assert read_source(tmp_path, "ok.js", include_minified=False) != SkipReason.MINIFIED
    kept, skipped = outcome(tmp_path, ScanOptions(include_minified=True))
    assert kept == {"app.min.js", "app.js.map", "bundle.js", "ok.js"}


def test_a_utf16_file_with_a_bom_is_decoded_not_skipped_as_binary(tmp_path: Path) -> None:
    text = "def greet():\n    return 'héllo'\n"
    (tmp_path / "le.py").write_bytes(text.encode("utf-16"))  # BOM + little-endian
    (tmp_path / "be.py").write_bytes(b"\xfe\xff" + text.encode("utf-16-be"))
    for name in ("le.py", "be.py"):
        source = read_source(tmp_path, name)
        assert not isinstance(source, SkipReason)
        assert source[1] == text


IGNORE_PATTERNS = [
    ".*", "*.o", "*.o.*", "/build/", "!keep.o", "docs/**/draft", "**/cache", "include/config",
    "include/asm-*/offsets.h", "a/**/b/*.txt", "[Bb]in/", "*~", r"\#*#", "!.gitignore", "vendor/",
    "!vendor/kept/", "logs/*.log", "!logs/important.log", "*.py[cod]", "nested/dir/", "x?z",
]
PATH_PARTS = ["src", "build", "docs", "draft", "cache", "include", "config", "asm-x86", "a", "b", "bin",
              "Bin", "vendor", "kept", "logs", "nested", "dir", "xyz", "pkg"]
FILE_NAMES = ["main.c", "main.o", "main.o.cmd", "keep.o", ".gitignore", ".env", "offsets.h", "notes.txt",
              "old~", "#tmp#", "important.log", "run.log", "mod.pyc", "mod.py", "xaz", "README"]


def test_the_one_regex_prefilter_never_changes_an_ignore_decision(tmp_path: Path) -> None:
    """Each folder's ignore rules first ask one combined regular expression whether any pattern
    matches; pathspec's last-match-wins logic decides only those paths. Every decision must be
    the one pathspec alone gives, files and folders, at every depth."""
    (tmp_path / ".gitignore").write_text("\n".join(IGNORE_PATTERNS) + "\n")
    fast = scan_module._load_rules(tmp_path, "", (".gitignore",))
    assert fast is not None and fast.any_pattern is not None
    exact = scan_module._Rules(fast.base, fast.spec, fast.origins, None)
    rng = random.Random(7)
    paths = {"/".join([*rng.sample(PATH_PARTS, rng.randrange(0, 4)), rng.choice(FILE_NAMES)]) for _ in range(4000)}
    decided = 0
    for path in sorted(paths):
        for is_dir in (False, True):
            expected = scan_module._ignored_by([exact], path, is_dir)
            assert scan_module._ignored_by([fast], path, is_dir) == expected, (path, is_dir)
            decided += expected is not None
    assert 0 < decided < 2 * len(paths)  # both outcomes were exercised


def _reference_split(path: str) -> tuple[list[str], str]:
    """The folders and the name, as kind_of and language_of found them before folders were
    cached: the whole path split every time."""
    *folders, name = [part for part in path.split("/") if part and part != "."] or [""]
    return folders, name


def _reference_kind(path: str, language: str) -> FileKind:
    folders, name = _reference_split(path)
    dirs = {part.lower() for part in folders}
    if dirs & lang._TEST_DIRS or lang._TEST_FILE.match(name):
        return FileKind.TEST
    docs_by_name = lang._DOCS_NAME.match(name) and (not language or language in lang.DOCS_LANGUAGES)
    if (dirs & lang._DOCS_DIRS and language != "go") or language in lang.DOCS_LANGUAGES or docs_by_name:
        return FileKind.DOCS
    if language in lang.CONFIG_LANGUAGES or name in lang._CONFIG_NAMES or (not language and name.startswith(".")):
        return FileKind.CONFIG
    return FileKind.CODE


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(["", ".", "src", "tests", "Test", "docs", "doc", "spec", "a", ".."]), max_size=4),
    st.sampled_from(["test_a.py", "a_test.go", "README.md", "conf.py", ".bashrc", "Makefile", "x.go", "a.", "", ".", "x.rst"]),
    st.sampled_from(["", "/"]),
    st.sampled_from([None, "go", "markdown", ""]),
)
def test_kind_of_with_cached_folders_agrees_with_splitting_the_whole_path(
    folders: list[str], name: str, tail: str, language: str | None
) -> None:
    path = "/".join([*folders, name]) + tail
    reference_name = _reference_split(path)[1]
    if reference_name in lang.LANGUAGE_BY_FILENAME:
        expected_language = lang.LANGUAGE_BY_FILENAME[reference_name]
    else:
        expected_language = lang.LANGUAGE_BY_EXTENSION.get(lang._suffix(reference_name).lower(), "")
    assert language_of(path) == expected_language
    language = expected_language if language is None else language
    assert kind_of(path, language) == _reference_kind(path, language)


def _under(item_path: str, rel: str) -> bool:
    bare = item_path.rstrip("/")
    return bare == rel or bare.startswith(rel + "/")


@pytest.mark.parametrize("gitignore", ["auto", "never"])
def test_scanning_some_paths_says_what_the_whole_walk_says_of_them(tmp_path: Path, gitignore: str) -> None:
    write_tree(tmp_path, {
        ".git/HEAD": "ref: refs/heads/main\n",
        ".git/info/exclude": "excluded.py\n",
        ".gitignore": "*.log\ngenerated/\n",
        ".ignore": "private/\n",
        "app.py": "x = 1\n", "debug.log": "noise\n", "excluded.py": "e\n", "generated/out.py": "y = 2\n",
        "pkg/.gitignore": "secret.py\n!keep.log\ndeep/skip/\n",
        "pkg/secret.py": "z = 3\n", "pkg/keep.log": "kept\n", "pkg/mod.py": "w = 4\n",
        "pkg/deep/skip/a.py": "a\n", "pkg/deep/ok/b.py": "b\n", "pkg/deep/ok/.codewhereignore": "c.py\n",
        "pkg/deep/ok/c.py": "c\n", "private/key.py": "k\n", "node_modules/x/index.js": "i\n",
        "vendor/plain/.git/HEAD": "nested\n", "vendor/plain/.gitignore": "*.tmp\n", "vendor/plain/t.tmp": "t\n",
        "vendor/plain/v.py": "v\n", "package-lock.json": "{}\n", "app.min.js": "m\n",
    })
    (tmp_path / "link.py").symlink_to(tmp_path / "app.py")
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path / "pkg")
    options = ScanOptions(gitignore=gitignore)
    whole = list(scan(tmp_path, options))
    paths = {item.path.rstrip("/") for item in whole}
    paths |= {str(Path(p).parent) for p in list(paths) if "/" in p}
    paths |= {"missing.py", "pkg/missing/x.py", "generated/out.py", "private/key.py", "node_modules/x/index.js"}
    for rel in sorted(paths):
        # what the walk says of anything at or under `rel`, when the walk reaches it at all
        expected = sorted((i for i in whole if _under(i.path, rel)), key=lambda i: i.path)
        got = sorted(scan_module.scan_paths(tmp_path, [rel], options), key=lambda i: i.path)
        assert got == expected, rel
    together = sorted(scan_module.scan_paths(tmp_path, ["pkg", "pkg/mod.py", "app.py"], options), key=lambda i: i.path)
    assert together == sorted((i for i in whole if _under(i.path, "pkg") or i.path == "app.py"), key=lambda i: i.path)
    assert sorted(scan_module.scan_paths(tmp_path, [""], options), key=lambda i: i.path) == sorted(whole, key=lambda i: i.path)


def test_a_worktrees_git_pointer_file_is_not_indexed(tmp_path: Path) -> None:
    write_tree(tmp_path, {".git": "gitdir: /elsewhere/.git/worktrees/topic\n", "app.py": "x = 1\n"})
    kept, skipped = outcome(tmp_path)
    assert kept == {"app.py"} and skipped == {".git": SkipReason.BUILTIN_DIR}
