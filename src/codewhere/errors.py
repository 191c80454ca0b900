"""One exception tree. Every error a user can cause says what went wrong and how to fix it."""

from __future__ import annotations


class CodewhereError(Exception):
    """A problem the user can fix; the CLI prints `codewhere: <message> — <hint>` and exits 2."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} — {self.hint}" if self.hint else self.message


class PathError(CodewhereError):
    """The path to index is missing, not a folder, or has nothing to index."""


class IndexFileError(CodewhereError):
    """The index file is corrupt, foreign, locked or built differently."""


class ForeignFileError(IndexFileError):
    """The index path holds another program's SQLite file: never touched."""


class IndexNotWritableError(IndexFileError):
    """The index cannot be written (read-only file or folder, full disk); it can still be read."""


class NotIndexedError(IndexFileError):
    """The folder has no index yet, and the command does not create one."""


class IndexBusyError(IndexFileError):
    """Another process holds the index's writer lock."""


class ServerBusyError(CodewhereError):
    """A long-lived server (MCP, the web page) is still answering an earlier question."""


class ModelError(CodewhereError):
    """The embedding model is missing, broken, or differs from the index's."""


class QueryError(CodewhereError):
    """The query cannot be run as given."""


class QueryInterrupted(QueryError):
    """A running query was stopped: it ran past its time limit, or its caller went away."""
