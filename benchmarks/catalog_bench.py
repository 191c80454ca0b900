"""How many translation-catalog hits crowd the top 10 of plain-language questions (issue 52).

    python benchmarks/catalog_bench.py TREE    # TREE: Django 5.1.4's sdist, unpacked

The ten questions were written before any result was seen; several quote a message Django shows
(and so every `.po` catalog holds). Prints each question's catalog hits in its top 10 and its
first hit, then the total. An index whose quality tier is complete is searched with it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from codewhere.api import Index
from codewhere.languages import TRANSLATION_CATALOGS

QUESTIONS = (
    "enter a valid email address",
    "the password is too similar to the username",
    "ensure this value has at most 100 characters",
    "this field is required",
    "how are migrations squashed",
    "check that an uploaded image is valid",
    "format a date according to the user's locale",
    "reject a URL that is not well formed",
    "send an email to the site admins when an error happens",
    "show a message when the login is wrong",
)


def main() -> None:
    tree = Path(sys.argv[1])
    total = 0
    with Index.open(tree) as index:
        index.refresh()
        for question in QUESTIONS:
            hits = index.search(question, k=10)
            crowding = sum(h.path.lower().endswith(TRANSLATION_CATALOGS) for h in hits)
            total += crowding
            first = f"{hits[0].path}:{hits[0].start_line}-{hits[0].end_line}" if hits else "-"
            print(f"{crowding:>2}  {question:<58} {first}")
    print(f"catalog hits in the top 10s: {total}")


if __name__ == "__main__":
    main()
