from __future__ import annotations

from dataclasses import replace

import pytest

from codewhere.chunk import (
    LONG_LINE_CHARS,
    chunk_file,
    chunk_source,
    content_hash,
    line_windows,
    split_lines,
    symbol_embed_text,
)
from codewhere.parse import parse
from codewhere.types import FileKind, FileRecord, Symbol, Unit


def windows(text: str, target: int = 2800, overlap: int = 320) -> list[tuple[int, int, str]]:
    return list(line_windows(text, target, overlap))


def test_windows_cover_every_line_with_overlap_and_inclusive_ranges() -> None:
    text = "".join(f"line {i:04d} " + "x" * 40 + "\n" for i in range(1, 301))  # 51 chars a line
    result = windows(text)
    assert result[0][0] == 1
    assert result[-1][1] == 300
    for (s1, e1, _), (s2, e2, _) in zip(result, result[1:], strict=False):
        assert s1 < s2 <= e1  # moves forward and overlaps
        assert e1 < e2
    for start, end, body in result:
        lines = body.splitlines()
        assert len(lines) == end - start + 1
        assert lines[0].startswith(f"line {start:04d}")
        assert lines[-1].startswith(f"line {end:04d}")


def test_window_reaches_the_target_and_overlap_reaches_its_budget() -> None:
    text = "".join("y" * 99 + "\n" for _ in range(100))  # 100 chars a line
    result = windows(text, target=1000, overlap=250)
    assert [(s, e) for s, e, _ in result[:3]] == [(1, 10), (8, 17), (15, 24)]


def test_a_line_up_to_the_long_line_limit_overshoots_rather_than_being_cut() -> None:
    text = "short\n" + "z" * 2000 + "\nafter\n"
    result = windows(text, target=100, overlap=10)
    assert any("z" * 2000 in body for _, _, body in result)
    assert all(body.endswith("\n") for _, _, body in result)


def test_a_longer_line_is_cut_into_pieces_each_stored_once() -> None:
    text = "short\n" + "z" * 7000 + "\nafter\n"
    result = windows(text, target=100, overlap=10)
    assert [(s, e) for s, e, _ in result] == [(1, 2), (2, 2), (2, 2), (2, 2), (3, 3)]
    assert max(len(body) for _, _, body in result) <= 2800 + len("short\n")
    assert sum(len(body) for _, _, body in result) <= 2 * len(text)  # an overlap repeats at most one piece


def test_chunker_moves_forward_on_one_huge_line() -> None:
    text = "a" * 200_000
    result = windows(text)
    assert {(s, e) for s, e, _ in result} == {(1, 1)}
    assert max(len(b) for _, _, b in result) <= LONG_LINE_CHARS
    assert sum(len(b) for _, _, b in result) == 200_000


def test_blank_chunks_are_dropped() -> None:
    text = "code\n" + "\n" * 2000 + "   \n" * 2000 + "tail\n"
    result = windows(text, target=400, overlap=40)
    assert all(body.strip() for _, _, body in result)
    assert result[0][0] == 1 and result[-1][1] == 4002


def test_only_newline_ends_a_line() -> None:
    assert split_lines("a\fb\x1cc\u2028d\r\ne\n") == ["a\fb\x1cc\u2028d\r\n", "e\n"]
    assert split_lines("no newline") == ["no newline"]
    assert split_lines("") == []


def test_chunk_record_carries_path_kind_language_hash_and_definitions() -> None:
    record = FileRecord("src/m.py", FileKind.CODE, "python", 0, 0)
    text = "import os\n\n\ndef raise_for_status(self):\n    pass\n"
    [chunk] = chunk_file(record, text)
    assert (chunk.path, chunk.start_line, chunk.end_line) == ("src/m.py", 1, 5)
    assert chunk.kind is FileKind.CODE and chunk.language == "python"
    assert chunk.embed_text.startswith("src/m.py\n")
    assert chunk.content_hash == content_hash(text)
    assert chunk.defines == ("raise_for_status",)  # as written; the store keeps its compound form beside it


def test_same_text_same_hash_whatever_the_path() -> None:
    a = chunk_file(FileRecord("a.py", FileKind.CODE, "python", 0, 0), "x = 1\n")[0]
    b = chunk_file(FileRecord("b/c.py", FileKind.CODE, "python", 0, 0), "x = 1\n")[0]
    assert a.content_hash == b.content_hash
    assert a.embed_text != b.embed_text


def test_smallest_chunk_by_line_picks_the_innermost_chunk() -> None:
    from codewhere.store.base import smallest_chunk_by_line

    owner = smallest_chunk_by_line([(1, 1, 40), (2, 10, 20), (3, 18, 30)])
    assert owner[5] == 1 and owner[12] == 2 and owner[19] == 2 and owner[25] == 3 and 41 not in owner


def test_doc_chunks_record_the_code_names_they_mention() -> None:
    from codewhere.chunk import chunk_source, mentioned_names
    from codewhere.types import FileKind, FileRecord

    text = "## Sessions\n\nUse `Session.send()` or :func:`~requests.get_netrc_auth`; call raise_for_status( when done.\n`id` is short.\n"
    assert mentioned_names(text) == ("getnetrcauth", "raiseforstatus", "send")
    doc = FileRecord("docs/api.md", FileKind.DOCS, "markdown", 0, 0)
    code = FileRecord("src/api.py", FileKind.CODE, "python", 0, 0)
    assert chunk_source(doc, text, None, "symbols")[0].mentions == ("getnetrcauth", "raiseforstatus", "send")
    assert chunk_source(code, "x = `raise_for_status`\n", None, "lines")[0].mentions == ()


def test_a_long_function_becomes_windows_and_the_first_defines_it() -> None:
    from codewhere.chunk import SPLIT_CHARS, chunk_source
    from codewhere.parse import parse
    from codewhere.types import FileKind, FileRecord

    body = "".join(f"    step_{i} = compute_something_long(value, {i})\n" for i in range(SPLIT_CHARS // 20))
    text = f"def short():\n    return 1\n\n\ndef long_one(value):\n{body}    return value\n"
    record = FileRecord("src/a.py", FileKind.CODE, "python", 0, 0)
    parsed = parse("python", text)
    chunks = [c for c in chunk_source(record, text, parsed.symbols, "symbols") if c.start_line >= 5]
    assert len(chunks) >= 2 and all(len(c.text) <= SPLIT_CHARS + 60 for c in chunks)
    assert chunks[0].start_line == 5 and chunks[0].defines == ("long_one",)
    assert all(c.defines == () for c in chunks[1:])
    assert all(b.start_line == a.end_line + 1 for a, b in zip(chunks, chunks[1:], strict=False))
    assert chunks[-1].end_line == text.count("\n")


def test_a_module_without_a_chunk_of_its_own_is_defined_where_it_starts() -> None:
    from codewhere.chunk import chunk_source
    from codewhere.parse import parse
    from codewhere.types import FileKind, FileRecord

    ruby = "module Sinatra\n  # helpers for routes\n  module Helpers\n    def status(value)\n      value\n    end\n  end\nend\n"
    chunks = chunk_source(FileRecord("lib/base.rb", FileKind.CODE, "ruby", 0, 0), ruby, parse("ruby", ruby).symbols, "symbols")
    holding = {name: [c for c in chunks if name in c.defines] for name in ("Sinatra", "Helpers", "status")}
    assert [c.start_line for c in holding["Helpers"]] == [1]  # the gap chunk before `def status`
    assert holding["Sinatra"] == holding["Helpers"]
    assert [(c.start_line, c.defines) for c in holding["status"]] == [(4, ("status",))]

    cpp = "namespace fmt {\nint format_to(int x) {\n  return x;\n}\n}\n"
    chunks = chunk_source(FileRecord("fmt/core.h", FileKind.CODE, "cpp", 0, 0), cpp, parse("cpp", cpp).symbols, "symbols")
    assert [c.start_line for c in chunks if "fmt" in c.defines] == [1]


def test_without_a_grammar_definitions_cut_the_file_and_small_pieces_merge() -> None:
    from codewhere.chunk import DEFINITION_PIECE_CHARS, chunk_source

    filler = "".join(f"    x{i} = compute({i}) + other_value({i})\n" for i in range(30))  # ~1,200 chars
    elixir = (
        "defmodule Plug.Conn do\n"
        "  @moduledoc false\n"
        "\n"
        '  @doc """\n'
        "  Halts the plug pipeline.\n"
        '  """\n'
        "  def halt(conn) do\n"
        "    %{conn | halted: true}\n"
        "  end\n"
        "\n"
        "  # sends the response\n"
        "  def send_resp(conn) do\n"
        f"{filler}"
        "  end\n"
        "end\n"
    )
    record = FileRecord("lib/plug/conn.ex", FileKind.CODE, "elixir", 0, 0)
    chunks = chunk_source(record, elixir, None, "symbols")
    # the module head and `halt` merge (small); `send_resp` is too big to join them: a new piece
    # that starts at its comment, and windows of at most the piece size after that
    assert [(c.start_line, c.defines) for c in chunks][:2] == [(1, ("Conn", "halt")), (11, ("send_resp",))]
    assert chunks[-1].end_line == elixir.count("\n")
    assert all(len(c.text) <= DEFINITION_PIECE_CHARS + 80 for c in chunks)
    covered = [line for c in chunks for line in range(c.start_line, c.end_line + 1)]
    assert covered == list(range(1, elixir.count("\n") + 1))  # every line once, no overlap
    # a doc block right above a definition starts the definition's piece
    big_head = elixir.replace("  @moduledoc false\n", "  @moduledoc false\n" + filler, 1)
    doc_line = big_head.split("\n").index('  @doc """') + 1
    assert doc_line in [c.start_line for c in chunk_source(record, big_head, None, "symbols")]


def test_the_lines_chunker_keeps_the_study_windows_without_a_grammar() -> None:
    from codewhere.chunk import chunk_file, chunk_source

    text = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(200))
    record = FileRecord("a.zig", FileKind.CODE, "zig", 0, 0)
    assert [(c.start_line, c.end_line) for c in chunk_source(record, text, None, "lines")] == [
        (c.start_line, c.end_line) for c in chunk_file(record, text)
    ]


def test_documentation_without_a_grammar_stays_in_line_windows() -> None:
    from codewhere.chunk import chunk_file, chunk_source

    text = "".join(f"function f{i} of the license applies to you\n\n" for i in range(150))
    record = FileRecord("LICENSE", FileKind.DOCS, "", 0, 0)
    assert [(c.start_line, c.end_line) for c in chunk_source(record, text, None, "symbols")] == [
        (c.start_line, c.end_line) for c in chunk_file(record, text)
    ]
    as_code = chunk_source(FileRecord("license.sh", FileKind.CODE, "", 0, 0), text, None, "symbols")
    assert len(as_code) > len(chunk_file(record, text))  # the same text as code is cut at "function …"


def test_every_chunk_of_a_definition_reports_it_whole() -> None:
    """The answer unit is the definition: a long function's windows and its head chunk all name
    it, from the doc comment and decorators above it to its last line."""
    body = "".join(f"    total += step_{i}(value)  # a line of work\n" for i in range(120))
    text = f"import os\n\n# Sums the steps.\n@traced\ndef long_sum(value):\n{body}    return total\n"
    record = FileRecord("src/sums.py", FileKind.CODE, "python", len(text), 0)
    parsed = parse("python", text)
    chunks = chunk_source(record, text, parsed.symbols if parsed else None, "symbols")
    of_function = [c for c in chunks if c.unit is not None]
    assert len(of_function) > 2, "the function is long enough to be windowed"
    end = text.count("\n")
    assert {c.unit for c in of_function} == {Unit(3, end, "long_sum")}  # the comment above and the decorator included
    assert all(c.unit is None for c in chunks if c not in of_function)  # the import window belongs to nothing


@pytest.mark.parametrize("chunker", ["lines", "symbols"])
def test_every_chunk_text_is_a_slice_of_its_file_that_text_offsets_finds(chunker: str) -> None:
    from codewhere.chunk import chunk_source, text_offsets

    long_line = "x = [" + ", ".join(str(n) for n in range(40_000)) + "]\n"  # cut into pieces
    big_function = "def big(value):\n" + "    value = value + 1  # a long body\n" * 400  # windows, a capped stored text
    sources = {
        "src/m.py": "import os\n\n\n@decorated\ndef helper(a, b):\n    \"\"\"Doc.\"\"\"\n    return a + b\n\n\nclass Shop:\n    def pay(self):\n        return 1\n" + big_function,
        "src/long.py": long_line + "def after():\n    return 2\n",
        "docs/guide.md": "# Title\n\nSome prose about `helper`.\n\n## Part\n\nMore prose.\r\n" * 30,
        "src/crlf.py": "def a():\r\n    return 1\r\n\r\ndef b():\r\n    return 2\r\n",
    }
    for path, text in sources.items():
        kind, language = (FileKind.DOCS, "markdown") if path.endswith(".md") else (FileKind.CODE, "python")
        record = FileRecord(path, kind, language, len(text), 0)
        parsed = parse(language, text)
        chunks = chunk_source(record, text, parsed.symbols if parsed else None, chunker)
        offsets = text_offsets(text, chunks)
        assert chunks and all(at >= 0 for at in offsets), path
        assert all(text[at : at + len(c.text)] == c.text for at, c in zip(offsets, chunks, strict=True)), path
    assert text_offsets("def a():\n    pass\n", [replace(chunks[0], text="elsewhere\n", start_line=1, end_line=1)]) == [-1]


def test_an_embedding_text_leaves_out_licence_lines_and_keeps_the_rest() -> None:
    body = ("def send(data):\n    # Copyright 2024 Example Ltd\n    total = len(data)\n"
            "    # All Rights Reserved\n    return total  # counts the bytes\n    # see the LICENSE file\n")
    symbol = Symbol("send", "send", "function", 1, 6, signature="def send(data):")
    text = symbol_embed_text("pkg/net.py", symbol, body)
    assert text.split("\n")[2:] == ["total = len(data)", "return total  # counts the bytes"]
