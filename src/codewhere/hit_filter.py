"""ripgrep's habits on search hits: `-g` globs and `-t` types choose which paths may answer,
`-C/-A/-B` widen a hit's lines with the file's lines around them, `--max-lines` caps them.

A glob or a type filters the ranked list, so the search asks for more hits than it shows
(`overfetch`) and keeps the first `k` that pass: the ranking itself is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from codewhere.errors import QueryError
from codewhere.languages import LANGUAGE_BY_EXTENSION
from codewhere.types import Hit

OVERFETCH = 5  # a filtered search ranks this many times `k` candidates
# ripgrep's type names for the languages codewhere knows, beside their own names
TYPE_ALIASES = {"py": "python", "js": "javascript", "ts": "typescript", "rs": "rust", "rb": "ruby", "cs": "csharp",
                "kt": "kotlin", "sh": "bash", "md": "markdown", "c++": "cpp", "cxx": "cpp", "hs": "haskell", "ex": "elixir"}


@dataclass(frozen=True)
class HitFilter:
    spec: object | None = None  # a pathspec.GitIgnoreSpec of the globs
    languages: frozenset[str] = frozenset()
    has_includes: bool = False

    @classmethod
    def parse(cls, globs: Sequence[str], types: Sequence[str]) -> HitFilter:
        known = set(LANGUAGE_BY_EXTENSION.values())
        languages = set()
        for name in types:
            language = TYPE_ALIASES.get(name.lower(), name.lower())
            if language not in known:
                raise QueryError(f"unknown type {name!r}", "use a language such as " + ", ".join(sorted(known)[:12]) + ", …")
            languages.add(language)
        spec = None
        if globs:
            import pathspec

            try:
                spec = pathspec.GitIgnoreSpec.from_lines(list(globs))
            except (ValueError, TypeError) as exc:
                raise QueryError(f"a --glob is not a valid pattern ({exc})", "use gitignore syntax: '*.py', 'src/**', '!tests/'") from exc
        return cls(spec, frozenset(languages), any(not g.startswith("!") for g in globs))

    @property
    def overfetch(self) -> int:
        return OVERFETCH if self.spec is not None or self.languages else 1

    def keeps(self, hit: Hit) -> bool:
        if self.languages and hit.language not in self.languages:
            return False
        if self.spec is None:
            return True
        # ripgrep's -g: a path must match an including glob (when there is one) and no excluding one;
        # gitignore's last-match-wins gives exactly that when includes come first
        decided = self.spec.check_file(hit.path).include  # type: ignore[attr-defined]
        return bool(decided) if decided is not None else not self.has_includes


def with_context(hit: Hit, lines: Sequence[str] | None, before: int, after: int, max_lines: int | None) -> Hit:
    """`hit` with its shown lines widened by `before`/`after` lines of the file and cut to
    `max_lines`; a hit whose file cannot be read keeps its lines (cut)."""
    shown = hit.snippet.split("\n") if hit.snippet else []
    first = hit.snippet_line or hit.start_line
    if lines is not None and (before or after):
        start = max(1, first - before)
        end = min(len(lines), first + max(len(shown), 1) - 1 + after)
        shown, first = list(lines[start - 1 : end]), start
    if max_lines is not None:
        shown = shown[:max_lines]
    return replace(hit, snippet="\n".join(shown), snippet_line=first)


@dataclass(frozen=True)
class HitShape:
    """ripgrep's habits as one value the CLI and the web page both apply: which paths may answer,
    how many lines around each hit, at most how many lines of it."""
    paths: HitFilter = HitFilter()
    before: int = 0
    after: int = 0
    max_lines: int | None = None

    @property
    def overfetch(self) -> int:
        return self.paths.overfetch

    @property
    def reshapes_lines(self) -> bool:
        """Whether a hit's shown lines are the asked ones (context or a cap) rather than its own."""
        return bool(self.before or self.after) or self.max_lines is not None

    def apply(self, hits: Sequence[Hit], k: int, file_lines: Callable[[str], Sequence[str] | None]) -> list[Hit]:
        """The first `k` hits the path filter keeps, with their lines widened and cut."""
        kept = [h for h in hits if self.paths.keeps(h)][:k]
        if self.reshapes_lines:
            kept = [with_context(h, file_lines(h.path), self.before, self.after, self.max_lines) for h in kept]
        return kept


def paths_of(hits: Sequence[Hit]) -> list[str]:
    """ripgrep's -l: the hits' paths, best first, once each."""
    return list(dict.fromkeys(hit.path for hit in hits))
