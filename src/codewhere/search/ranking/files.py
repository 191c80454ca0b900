"""Signal `file-words`: a file whose whole text holds the question's words lifts its chunks.

A chunk's scores say how well a few lines match; a question that describes behaviour ("setting
SERVER_NAME does not restrict routing ...") often spreads its words over the file that implements
it: the setting read in one function, the routing in another. The file's BM25 as one document
(its path and all its chunks, `files_fts`) sees that; each chunk is multiplied by
1 + `file_words_weight` × its file's score over the best file's score."""

from __future__ import annotations

from collections.abc import Mapping

from codewhere.search.ranking.scores import Scores


def lift_by_file_words(run: Scores, files: Mapping[tuple[str, str], float]) -> None:
    """`files`: (repository, path) → the file's BM25 score; a file not in it gains nothing."""
    top = max(files.values(), default=0.0)
    if top <= 0.0:
        return
    weight = run.p.file_words_weight
    for i, row in enumerate(run.rows):
        score = files.get((row.repo, row.path))
        if score:
            run.scale(i, 1.0 + weight * score / top, "file-words")
