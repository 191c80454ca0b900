from codewhere.search.query import parse_query
from codewhere.search.snippets import MAX_LINE_CHARS, snippet

BODY = "\n".join([
    "def fetch(url):",
    "    # no query word here",
    "    response = session.get(url)",
    "    response.raise_for_status()",
    "    return response.json()",
])


def test_snippet_starts_at_the_line_with_most_query_terms() -> None:
    line, text = snippet(BODY, 10, terms("raise for status of the response"))
    assert line == 13
    assert text.splitlines()[0] == "    response.raise_for_status()"


def test_snippet_matches_other_spellings_of_an_identifier() -> None:
    assert snippet(BODY, 1, terms("raiseForStatus"))[0] == 4
    assert snippet("a = 1\nclass HTTPAdapter:\n    pass", 1, terms("http-adapter"))[0] == 2


def test_snippet_without_a_matching_line_shows_the_first_lines() -> None:
    line, text = snippet(BODY, 7, terms("websocket handshake"), lines=2)
    assert (line, text) == (7, "def fetch(url):\n    # no query word here")


def test_snippet_cuts_a_long_line_and_still_scores_it() -> None:
    minified = "x=1;" * 50_000 + "needle()"
    line, text = snippet(f"{'var a;' * 400}\nvar needle = 1;\n{minified}", 1, terms("needle"))
    assert line == 2
    assert all(len(shown) <= MAX_LINE_CHARS + 1 for shown in text.splitlines())


def test_snippet_lines_stay_aligned_when_lowercasing_changes_length() -> None:
    # 'İ'.lower() is two characters; the fold must not shift which line is picked
    line, _ = snippet("İİİ\nx\nİ\nfind_me()", 1, terms("find_me"))
    assert line == 4


def terms(query: str) -> tuple[str, ...]:
    return parse_query(query).terms


def _plain_best_line(text: str, wanted: tuple[str, ...]) -> int:
    """The definition the fast path must agree with: tokenise every line, first of the best."""
    from codewhere.search.snippets import SCORED_LINE_CHARS
    from codewhere.tokens import index_tokens

    scores = [len(set(wanted) & set(index_tokens(line[:SCORED_LINE_CHARS]).split())) for line in text.splitlines()]
    return scores.index(max(scores)) if scores and max(scores) > 0 else 0


def test_snippet_picks_the_line_a_plain_scan_picks() -> None:
    import random

    rng = random.Random(7)
    words = ["fetch", "url", "raise_for_status", "Response", "status", "raise", "get_json", "İstanbul", "x" * 2100,
             "http-adapter", "HTTPAdapter", "ß", "#", "session.get", "\u2028", "\r\n", "response_json"]
    questions = ["raise for status", "response json", "http adapter session", "fetch url status raise", "istanbul x"]
    for _ in range(400):
        text = "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 12)))
        for question in questions:
            wanted = terms(question)
            assert snippet(text, 1, wanted)[0] - 1 == _plain_best_line(text, wanted), (text, question)


def test_snippet_shows_no_empty_line_after_the_last_break() -> None:
    assert snippet("def a():\n    return b\n", 5, terms("return b"), lines=3) == (6, "    return b")
    assert snippet("one\r\ntwo\r\n", 1, terms("two"), lines=3) == (2, "two")
