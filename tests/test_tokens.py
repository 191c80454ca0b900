from __future__ import annotations

import pytest

from codewhere.defs import find_definitions
from codewhere.tokens import (
    identifier_name,
    index_tokens,
    is_identifier_query,
    query_terms,
    split_identifier,
)


@pytest.mark.parametrize(
    ("word", "parts"),
    [
        ("should_strip_auth", ["should", "strip", "auth"]),
        ("shouldStripAuth", ["should", "strip", "auth"]),
        ("ShouldStripAuth", ["should", "strip", "auth"]),
        ("HTTPAdapter", ["http", "adapter"]),
        ("parseHTTPResponse2", ["parse", "http", "response", "2"]),
        ("kebab-case-name", ["kebab", "case", "name"]),
        ("__init__", ["init"]),
    ],
)
def test_split_identifier(word: str, parts: list[str]) -> None:
    assert split_identifier(word) == parts


def test_compound_is_kept_beside_its_parts() -> None:
    assert index_tokens("should_strip_auth") == "shouldstripauth should strip auth"
    assert index_tokens("shouldStripAuth") == "shouldstripauth should strip auth"
    assert index_tokens("HTTPAdapter") == "httpadapter http adapter"
    assert index_tokens("self.session.send") == "self session send"


def test_tokens_cover_dots_dashes_and_unicode() -> None:
    assert index_tokens("os.path-join") == "os pathjoin path join"
    assert index_tokens("café_naïve") == "cafénaïve café naïve"


def test_very_long_runs_are_not_tokens() -> None:
    assert index_tokens("a" * 65 + " ok") == "ok"


def test_query_terms_drop_stop_words_unless_nothing_is_left() -> None:
    assert query_terms("don't send the password to another site after a redirect") == [
        "send", "password", "another", "site", "redirect",
    ]
    assert query_terms("the") == ["the"]
    assert query_terms("raise_for_status") == ["raiseforstatus", "raise", "status"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("raise_for_status", True), ("Foo::bar", True), ("getUserById", True), ("Session.send", True),
        ("UnrewindableBodyError", True), ("send()", True), ("redirect", False), ("Redirect", False),
        ("skip the proxy", False), ("what is foo_bar", False),
    ],
)
def test_identifier_queries(query: str, expected: bool) -> None:
    assert is_identifier_query(query) is expected


def test_identifier_name_is_the_last_segment_compound() -> None:
    assert identifier_name("Session.resolve_redirects") == "resolveredirects"
    assert identifier_name("Foo::barBaz()") == "barbaz"


def test_definitions_across_languages() -> None:
    source = """class Foo(Bar):
    def should_strip_auth(self, a):
        if (x) {
func (s *Srv) Handle(w http.ResponseWriter) {
export const useThing = (a) => a
pub fn parse_it<T>(x: T) -> u8 {
public static int computeSum(int a, int b) {
deploy() {
#define MAX_SIZE 10
while (running) {
"""
    in_python = {name for _, name in find_definitions(source, "python")}
    assert {"Foo", "should_strip_auth"} <= in_python and not in_python & {"useThing", "computeSum", "deploy"}
    assert find_definitions(source, "markdown") == []
    assert find_definitions(source) == [
        (1, "Foo"), (2, "should_strip_auth"), (4, "Handle"), (5, "useThing"), (6, "parse_it"),
        (7, "computeSum"), (8, "deploy"), (9, "MAX_SIZE"),
    ]


def test_definitions_in_languages_without_a_grammar_name_the_last_segment() -> None:
    elixir = "defmodule Ecto.Query do\n  def from(expr, kw \\\\ []) do\n  defp build?(x), do: x\n  defmacro where(q, b)\n  from(q)\n"
    assert find_definitions(elixir, "elixir") == [(1, "Query"), (2, "from"), (3, "build"), (4, "where")]
    haskell = (
        "module Data.Aeson.Types.Internal\n  ( Parser\n  ) where\ndata Value = Object !Object\n"
        "newtype Parser a = Parser {\nparseEither :: (a -> Parser b) -> a -> Either String b\n"
        "parseEither m v = x\nclass (Monad m) => MonadParser m where\n  inner :: Int\n"
    )
    assert find_definitions(haskell, "haskell") == [(1, "Internal"), (4, "Value"), (5, "Parser"), (6, "parseEither"),
                                                    (8, "MonadParser")]
    lua = "local M = {}\nfunction M.setup(opts)\nfunction M:close()\nlocal function helper(x)\nM.run = function(a)\nM.value = 3\n"
    assert find_definitions(lua, "lua") == [(2, "setup"), (3, "close"), (4, "helper"), (5, "run")]
    zig = "pub fn parse(comptime T: type) !T {\nconst Self = @This();\npub const Param = struct {\nconst Kind = enum(u8) {\n"
    assert find_definitions(zig, "zig") == [(1, "parse"), (3, "Param"), (4, "Kind")]


@pytest.mark.parametrize(
    ("language", "source", "names"),
    [
        ("perl", "package Mojo::UserAgent;\nsub start {\n  my $self = shift;\n", ["UserAgent", "start"]),
        ("r", "read_config <- function(path) {\nhelper = function(x) x\nx <- 3\n", ["read_config", "helper"]),
        ("clojure", "(defn wrap-params\n  [handler]\n(defprotocol Store\n(def ^:private cache (atom {}))\n",
         ["wrap-params", "Store", "cache"]),
        ("julia", "module Flux\nfunction train!(loss, ps)\nmutable struct State\narea(r) = pi * r^2\nx == y\n",
         ["Flux", "train", "State", "area"]),
        ("ocaml", "let rec parse_expr lexbuf =\nand parse_term t =\ntype token = INT of int\nmodule Lexer = struct\nlet () = main ()\n",
         ["parse_expr", "parse_term", "token", "Lexer"]),
        ("erlang", "-module(cowboy_req).\nparse_header(Name, Req) ->\nreply(S, Req) when is_integer(S) ->\n    ok.\n",
         ["cowboy_req", "parse_header", "reply"]),
    ],
)
def test_definitions_in_more_languages(language: str, source: str, names: list[str]) -> None:
    assert [name for _, name in find_definitions(source, language)] == names
