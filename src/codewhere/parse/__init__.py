"""tree-sitter parsing: symbols and edges for languages with a grammar. Only this package imports tree-sitter."""

from codewhere.parse.parser import ParseBudgetExceeded, ParseResult, has_grammar, parse

__all__ = ["ParseBudgetExceeded", "ParseResult", "has_grammar", "parse"]
