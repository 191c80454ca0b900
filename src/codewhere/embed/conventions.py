"""What each known model expects around a query and a document, by model id.

Models trained with instructions lose much of their quality without them (bge's query
instruction, e5's `query:` / `passage:`), so every provider applies the same table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Convention:
    query_prefix: str = ""
    document_prefix: str = ""
    max_seq_length: int = 512


# (substring of the lower-cased model id, convention); the first match wins.
CONVENTIONS: tuple[tuple[str, Convention], ...] = (
    ("bge-m3", Convention(max_seq_length=8192)),
    ("bge-", Convention(query_prefix="Represent this sentence for searching relevant passages: ")),
    ("e5-", Convention(query_prefix="query: ", document_prefix="passage: ")),
    ("coderankembed", Convention(query_prefix="Represent this query for searching relevant code: ", max_seq_length=8192)),
    ("nomic-embed", Convention(query_prefix="search_query: ", document_prefix="search_document: ", max_seq_length=8192)),
    ("minilm", Convention(max_seq_length=256)),
)


def convention_for(model_id: str) -> Convention:
    lowered = model_id.lower()
    for needle, convention in CONVENTIONS:
        if needle in lowered:
            return convention
    return Convention()
