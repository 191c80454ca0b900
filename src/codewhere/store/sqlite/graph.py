"""The code graph: symbols and edges, their resolution and the graph questions (a GraphReader)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Sequence

import apsw

from codewhere.errors import (
    QueryError,
)
from codewhere.store.base import (
    KEPT_PRECISE,
    EdgeSource,
    edge_sources_sql,
    like_escape,
)
from codewhere.store.sqlite import schema
from codewhere.store.sqlite.schema import RESOLUTION_CODES, _apsw_errors_mapped, fts5_expression
from codewhere.store.sqlite.writer import Writer
from codewhere.types import (
    EdgeHit,
    EdgeRow,
    EdgeSite,
    SymbolRef,
    SymbolRow,
    SymbolSpan,
    TermQuery,
)

log = logging.getLogger(__name__)


@_apsw_errors_mapped
class Graph(Writer):
    """The code graph: symbols and edges, their resolution and the graph questions (a GraphReader)."""

    # ---- the code graph ------------------------------------------------------------------

    _SYMBOL_COLUMNS = """s.id, f.path, s.name, s.qualified_name, s.kind, s.start_line, s.end_line, s.signature,
                         s.doc, s.parent, f.language"""

    def resolution_inputs(
        self, names: Sequence[str] | None = None, paths: Sequence[str] = ()
    ) -> tuple[Iterable[EdgeRow], list[SymbolRef], set[tuple[int, str]]]:
        """Every edge, every symbol (id, file, name, kind) and every (file, imported name); or,
        given `names`, only the edges naming one of them or lying in one of `paths`, with the
        symbols and imports those edges can resolve to. Every edge is read page by page, in id
        order, as it is consumed (the caller may update edges between pages)."""
        edge_sql = f"""SELECT e.id, e.file_id, e.kind, e.target_name, coalesce(s.parent, '')
                       FROM edges e LEFT JOIN symbols s ON s.id = e.source_id WHERE NOT {KEPT_PRECISE}"""
        if names is None:
            edges: Iterable[EdgeRow] = self._edge_pages(edge_sql)
            symbols = list(map(SymbolRef._make, self._db.execute("SELECT id, file_id, name, kind, parent FROM symbols")))
            imported = {(f, n) for f, n in self._db.execute("SELECT file_id, target_name FROM edges WHERE kind = 'import'")}
            return edges, symbols, imported
        edges = [EdgeRow(*r) for r in self._db.execute(
            edge_sql + """ AND (e.name_id IN (SELECT m.id FROM names m JOIN json_each(?1) j ON m.name = j.value)
                           OR e.file_id IN (SELECT f.id FROM files f JOIN json_each(?2) j ON f.path = j.value))""",
            (json.dumps(sorted(names)), json.dumps(list(paths))),
        )]
        wanted = json.dumps(sorted({e.target_name for e in edges}))
        files = json.dumps(sorted({e.file_id for e in edges}))
        symbols = [SymbolRef(*r) for r in self._db.execute(
            "SELECT id, file_id, name, kind, parent FROM symbols WHERE name IN (SELECT value FROM json_each(?))", (wanted,)
        )]
        imported = {(f, n) for f, n in self._db.execute(
            "SELECT file_id, target_name FROM edges WHERE kind = 'import' AND file_id IN (SELECT value FROM json_each(?))",
            (files,),
        )}
        return edges, symbols, imported

    def _edge_pages(self, edge_sql: str) -> Iterator[EdgeRow]:
        after, page = 0, schema.EDGE_PAGE
        while True:
            rows = list(map(EdgeRow._make, self._db.execute(f"{edge_sql} AND e.id > ? ORDER BY e.id LIMIT ?", (after, page))))
            yield from rows
            if len(rows) < page:
                return
            after = rows[-1].id

    def edge_sites(self, paths: Sequence[str] | None = None) -> list[EdgeSite]:
        sql = "SELECT e.id, f.path, e.line, e.target_name, e.kind FROM edges e JOIN files f ON f.id = e.file_id"
        if paths is None:
            return [EdgeSite(*r) for r in self._db.execute(sql)]
        return [EdgeSite(*r) for r in self._db.execute(
            sql + " WHERE f.path IN (SELECT value FROM json_each(?))", (json.dumps(list(paths)),))]

    def resolved_edges(self) -> list[tuple[EdgeSite, int | None, str]]:
        """Every edge with its target and resolution: what a comparison of graphs reads."""
        return [(EdgeSite(*r[:5]), r[5], r[6]) for r in self._db.execute(
            """SELECT e.id, f.path, e.line, e.target_name, e.kind, e.target_id, e.resolution
               FROM edges e JOIN files f ON f.id = e.file_id""")]

    def resolution_counts(self, resolution: str) -> dict[str, int]:
        """Edges resolved by `resolution`, per file."""
        return dict(self._db.execute(
            """SELECT f.path, count(*) FROM edges e JOIN files f ON f.id = e.file_id WHERE e.resolution = ?
               GROUP BY f.path""", (resolution,)))

    def symbol_spans(self, paths: Sequence[str]) -> list[SymbolSpan]:
        return [SymbolSpan(*r) for r in self._db.execute(
            """SELECT s.id, f.path, s.name, s.start_line, s.end_line FROM symbols s JOIN files f ON f.id = s.file_id
               WHERE f.path IN (SELECT value FROM json_each(?))""", (json.dumps(list(paths)),))]

    def set_edge_targets(self, rows: Iterable[tuple[int, int | None, str]]) -> None:
        self._db.executemany(
            "UPDATE edge_rows SET target_id = ?, resolution = ? WHERE id = ?",
            [(t, RESOLUTION_CODES[r], i) for i, t, r in rows],
        )

    def _symbol_rows(self, where: str, params: Sequence[object]) -> list[SymbolRow]:
        sql = f"SELECT {self._SYMBOL_COLUMNS} FROM symbols s JOIN files f ON f.id = s.file_id WHERE {where}"
        return [SymbolRow(*r) for r in self._db.execute(sql, params)]

    def symbols_named(self, name: str) -> list[SymbolRow]:
        return self._symbol_rows("s.name = ? ORDER BY f.path, s.start_line", (name,))

    def symbols_qualified(self, qualified: str) -> list[SymbolRow]:
        return self._symbol_rows(
            "(s.qualified_name = ? OR s.qualified_name LIKE ? ESCAPE '\\') ORDER BY f.path, s.start_line",
            (qualified, "%." + like_escape(qualified)),
        )

    def symbols_at(self, path: str, line: int) -> list[SymbolRow]:
        """Symbols whose span holds the line, innermost first."""
        return self._symbol_rows(
            "f.path = ? AND s.start_line <= ? AND s.end_line >= ? ORDER BY s.start_line DESC, s.end_line ASC",
            (path, line, line),
        )

    def symbols_by_id(self, ids: Sequence[int]) -> dict[int, SymbolRow]:
        if not ids:
            return {}
        rows = self._symbol_rows(f"s.id IN ({','.join('?' * len(ids))})", list(ids))
        return {r.id: r for r in rows}

    def outline(self, path: str) -> list[SymbolRow]:
        return self._symbol_rows("f.path = ? ORDER BY s.start_line, s.end_line DESC", (path,))

    def symbol_search(self, query: TermQuery, limit: int) -> list[SymbolRow]:
        """Symbols whose name tokens match the query, best BM25 first."""
        match = fts5_expression(query)
        sql = f"""SELECT {self._SYMBOL_COLUMNS} FROM symbols_fts JOIN symbols s ON s.id = symbols_fts.rowid
                  JOIN files f ON f.id = s.file_id WHERE symbols_fts MATCH ?
                  ORDER BY bm25(symbols_fts, 4.0, 2.0, 1.0), f.path LIMIT ?"""
        try:
            return [SymbolRow(*r) for r in self._db.execute(sql, (match, limit))]
        except apsw.SQLError as exc:
            raise QueryError(f"the symbol query could not run ({exc})", "remove unusual punctuation") from exc

    def edges_to(self, symbol_ids: Sequence[int], kinds: Sequence[str]) -> list[EdgeHit]:
        """Edges resolved to any of the symbols (who calls / imports / extends them)."""
        if not symbol_ids:
            return []
        sql = f"""SELECT e.kind, e.source_id, e.target_id, e.target_name, e.resolution, f.path, e.line
                  FROM edges e JOIN files f ON f.id = e.file_id
                  WHERE e.target_id IN ({','.join('?' * len(symbol_ids))}) AND e.kind IN ({','.join('?' * len(kinds))})
                  ORDER BY f.path, e.line"""
        return [EdgeHit(*r) for r in self._db.execute(sql, (*symbol_ids, *kinds))]

    def unresolved_edges_named(self, name: str, kinds: Sequence[str]) -> list[EdgeHit]:
        """Edges to `name` that resolution could not pin to one symbol (ambiguous or external)."""
        sql = f"""SELECT e.kind, e.source_id, e.target_id, e.target_name, e.resolution, f.path, e.line
                  FROM edges e JOIN files f ON f.id = e.file_id
                  WHERE e.target_name = ? AND e.target_id IS NULL AND e.kind IN ({','.join('?' * len(kinds))})
                  ORDER BY f.path, e.line"""
        return [EdgeHit(*r) for r in self._db.execute(sql, (name, *kinds))]

    def edges_from(self, symbol_id: int, kinds: Sequence[str]) -> list[EdgeHit]:
        sql = f"""SELECT e.kind, e.source_id, e.target_id, e.target_name, e.resolution, f.path, e.line
                  FROM edges e JOIN files f ON f.id = e.file_id
                  WHERE e.source_id = ? AND e.kind IN ({','.join('?' * len(kinds))}) ORDER BY e.line"""
        return [EdgeHit(*r) for r in self._db.execute(sql, (symbol_id, *kinds))]

    def edge_sources(self, target_ids: Sequence[int], kinds: Sequence[str]) -> list[EdgeSource]:
        """Each `kinds` edge into the symbols, by path and line."""
        out: list[EdgeSource] = []
        for at in range(0, len(target_ids), 500):
            part = target_ids[at : at + 500]
            sql = edge_sources_sql(",".join("?" * len(part)), ",".join("?" * len(kinds)))
            out += [EdgeSource(*r) for r in self._db.execute(sql, (*part, *kinds))]
        return out if len(target_ids) <= 500 else sorted(out, key=lambda r: (r.path, r.line))

    def graph_stats(self) -> dict[str, object]:
        by_resolution = dict(self._db.execute("SELECT kind || ':' || resolution, count(*) FROM edges GROUP BY 1"))
        per_language: dict[str, dict[str, dict[str, int]]] = {}
        for language, kind, resolution, n in self._db.execute(
            """SELECT f.language, e.kind, e.resolution, count(*) FROM edges e JOIN files f ON f.id = e.file_id
               GROUP BY 1, 2, 3"""
        ):
            per_language.setdefault(language, {}).setdefault(kind, {})[resolution] = n
        symbols = dict(self._db.execute("SELECT kind, count(*) FROM symbols GROUP BY 1"))
        return {"symbols": symbols, "edges": by_resolution, "per_language": per_language}

