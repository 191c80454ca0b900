"""The team index's schema: its migrations, and the partitions each repository gets.

Since version 7 every table that grows with code (files, chunks, their keyword vectors, definitions,
vectors, symbols, edges) is partitioned by repository (`PARTITION BY LIST (repo_id)`): a
repository is one partition of each, created when its first indexer writes, dropped when it is
dropped, and a search scoped to repositories reads only their partitions. The schema is ready to be
distributed by the same column (docs/team.md, "Past one server"): every primary key and unique
index starts with `repo_id`, tables join on it, and no row takes its id from a sequence shared by
repositories: a repository's ids start at `repo_id << REPO_ID_SHIFT`, and its one writer (the
advisory lock) counts on from the largest it holds. `repos`, `repo_meta` and `settings` stay small
and unpartitioned (a sharded database keeps them as reference tables).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

SCHEMA = "codewhere"
LOCK_NAMESPACE = 0x63776872  # "cwhr": first key of codewhere's advisory locks
MIGRATION_LOCK = 0  # second key while migrating; repositories use an odd hash of their name
REPO_ID_SHIFT = 36  # a repository's row ids: [repo_id << 36, (repo_id + 1) << 36): 68 billion each
# children first: dropping a repository detaches them in this order's reverse-free way (no keys between them)
PARTITIONED = ("files", "chunks", "definitions", "embeddings", "symbols", "edges")

# Each entry upgrades the schema by one version; an index never goes back.
TEXT_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE repos(id SERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE);
    CREATE TABLE repo_meta(
        repo_id INTEGER NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
        key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY(repo_id, key)
    );
    CREATE TABLE files(
        id BIGSERIAL PRIMARY KEY,
        repo_id INTEGER NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
        path TEXT NOT NULL, size BIGINT NOT NULL, mtime_ns BIGINT NOT NULL, hash TEXT,
        kind TEXT NOT NULL, language TEXT NOT NULL, skip_reason TEXT,
        UNIQUE(repo_id, path)
    );
    CREATE TABLE chunks(
        id BIGSERIAL PRIMARY KEY,
        file_id BIGINT NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        repo_id INTEGER NOT NULL,
        start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
        content_hash TEXT NOT NULL, text TEXT NOT NULL,
        embed_text TEXT,  -- NULL: not embedded (imports and assignments only)
        fts TSVECTOR NOT NULL
    );
    CREATE INDEX chunks_file ON chunks(file_id);
    CREATE INDEX chunks_repo ON chunks(repo_id, id);
    CREATE INDEX chunks_hash ON chunks(content_hash);
    CREATE INDEX chunks_fts ON chunks USING GIN(fts);
    CREATE TABLE definitions(
        chunk_id BIGINT NOT NULL REFERENCES chunks(id) ON DELETE CASCADE, name TEXT NOT NULL
    );
    CREATE INDEX definitions_name ON definitions(name);
    CREATE INDEX definitions_chunk ON definitions(chunk_id);
    -- The column gets its dimension when a model is bound (bind_model), then an HNSW index.
    CREATE TABLE embeddings(id BIGSERIAL PRIMARY KEY, content_hash TEXT NOT NULL UNIQUE, embedding vector NOT NULL);
    CREATE TABLE symbols(
        id BIGSERIAL PRIMARY KEY,
        file_id BIGINT NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        repo_id INTEGER NOT NULL,
        name TEXT NOT NULL, name_key TEXT NOT NULL, qualified_name TEXT NOT NULL, kind TEXT NOT NULL,
        start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
        signature TEXT NOT NULL, doc TEXT NOT NULL, decorators TEXT NOT NULL, parent TEXT NOT NULL,
        split TEXT NOT NULL, fts TSVECTOR NOT NULL
    );
    CREATE INDEX symbols_repo_name ON symbols(repo_id, name);
    CREATE INDEX symbols_repo_key ON symbols(repo_id, name_key);
    CREATE INDEX symbols_qualified ON symbols(qualified_name);
    CREATE INDEX symbols_file ON symbols(file_id);
    CREATE INDEX symbols_fts ON symbols USING GIN(fts);
    -- source_id: the enclosing symbol (NULL at module level); target_id: set by resolution.
    CREATE TABLE edges(
        id BIGSERIAL PRIMARY KEY,
        file_id BIGINT NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        repo_id INTEGER NOT NULL,
        kind TEXT NOT NULL, source_id BIGINT, target_name TEXT NOT NULL, target_id BIGINT,
        resolution TEXT NOT NULL DEFAULT 'unresolved', line INTEGER NOT NULL
    );
    CREATE INDEX edges_file ON edges(file_id, kind, line);
    CREATE INDEX edges_source ON edges(source_id);
    CREATE INDEX edges_target ON edges(target_id);
    CREATE INDEX edges_repo_name ON edges(repo_id, target_name);
    """,
    # Where each definition and call lives, and the code names a doc chunk mentions: written with
    # the file, so the evidence signal needs no range join at query time. Forgetting each
    # repository's chunker version makes its next refresh rewrite every file (vectors are kept).
    """
    ALTER TABLE chunks ADD COLUMN mentions TEXT;
    ALTER TABLE symbols ADD COLUMN chunk_id BIGINT;
    ALTER TABLE edges ADD COLUMN chunk_id BIGINT;
    CREATE INDEX edges_chunk ON edges(chunk_id);
    DELETE FROM repo_meta WHERE key = 'chunker_version';
    """,
    # Each definition as written (`Helpers`) beside its compound name, so a name typed with a capital
    # can ask for its exact spelling. Rows written before have none: forgetting the chunker version
    # makes each repository's next refresh write them again.
    """
    ALTER TABLE definitions ADD COLUMN spelled TEXT NOT NULL DEFAULT '';
    DELETE FROM repo_meta WHERE key = 'chunker_version';
    """,
    # Each write transaction counts itself in its repository's row: a reader keeping chunks in
    # memory (store/warm.py) rereads when the counts move.
    """
    ALTER TABLE repos ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
    """,
    # The definition each chunk belongs to (types.Unit), what a hit of it reports. Forgetting each
    # repository's chunker version makes its next refresh write them (vectors are kept).
    """
    ALTER TABLE chunks ADD COLUMN unit_start INTEGER, ADD COLUMN unit_end INTEGER, ADD COLUMN unit_name TEXT;
    DELETE FROM repo_meta WHERE key = 'chunker_version';
    """,
    # Each file as one document (its path and all its chunks' tokens) for a file-level keyword
    # score. Forgetting each repository's chunker version makes its next refresh write them.
    """
    ALTER TABLE files ADD COLUMN fts TSVECTOR;
    CREATE INDEX files_fts ON files USING GIN(fts);
    DELETE FROM repo_meta WHERE key = 'chunker_version';
    """,
)


# Version 7: the tables that grow with code partitioned by repository, keyed by (repo_id, id).
PARTITIONED_TABLES = """
CREATE TABLE files(
    repo_id INTEGER NOT NULL, id BIGINT NOT NULL,
    path TEXT NOT NULL, size BIGINT NOT NULL, mtime_ns BIGINT NOT NULL, hash TEXT,
    kind TEXT NOT NULL, language TEXT NOT NULL, skip_reason TEXT, fts TSVECTOR,
    PRIMARY KEY(repo_id, id), UNIQUE(repo_id, path)
) PARTITION BY LIST (repo_id);
CREATE INDEX files_words ON files USING GIN(fts);
CREATE TABLE chunks(
    repo_id INTEGER NOT NULL, id BIGINT NOT NULL, file_id BIGINT NOT NULL,
    start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
    content_hash TEXT NOT NULL, text TEXT NOT NULL,
    embed_text TEXT,  -- NULL: not embedded (imports and assignments only)
    fts TSVECTOR NOT NULL, mentions TEXT, unit_start INTEGER, unit_end INTEGER, unit_name TEXT,
    PRIMARY KEY(repo_id, id)
) PARTITION BY LIST (repo_id);
CREATE INDEX chunks_of_file ON chunks(repo_id, file_id);
CREATE INDEX chunks_by_hash ON chunks(repo_id, content_hash);
CREATE INDEX chunks_words ON chunks USING GIN(fts);
CREATE TABLE definitions(
    repo_id INTEGER NOT NULL, chunk_id BIGINT NOT NULL, file_id BIGINT NOT NULL,
    name TEXT NOT NULL, spelled TEXT NOT NULL DEFAULT ''
) PARTITION BY LIST (repo_id);
CREATE INDEX definitions_by_name ON definitions(name);
CREATE INDEX definitions_of_chunk ON definitions(repo_id, chunk_id);
CREATE INDEX definitions_of_file ON definitions(repo_id, file_id);
-- One vector per distinct chunk text of a repository. The column gets its dimension when a model
-- is bound (bind_model), then an HNSW index, which each partition gets as its own.
CREATE TABLE embeddings(
    repo_id INTEGER NOT NULL, content_hash TEXT NOT NULL, embedding vector NOT NULL,
    PRIMARY KEY(repo_id, content_hash)
) PARTITION BY LIST (repo_id);
CREATE TABLE symbols(
    repo_id INTEGER NOT NULL, id BIGINT NOT NULL, file_id BIGINT NOT NULL,
    name TEXT NOT NULL, name_key TEXT NOT NULL, qualified_name TEXT NOT NULL, kind TEXT NOT NULL,
    start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
    signature TEXT NOT NULL, doc TEXT NOT NULL, decorators TEXT NOT NULL, parent TEXT NOT NULL,
    split TEXT NOT NULL, fts TSVECTOR NOT NULL, chunk_id BIGINT,
    PRIMARY KEY(repo_id, id)
) PARTITION BY LIST (repo_id);
CREATE INDEX symbols_by_name ON symbols(repo_id, name);
CREATE INDEX symbols_by_key ON symbols(repo_id, name_key);
CREATE INDEX symbols_by_qualified ON symbols(repo_id, qualified_name);
CREATE INDEX symbols_of_file ON symbols(repo_id, file_id);
CREATE INDEX symbols_words ON symbols USING GIN(fts);
-- source_id: the enclosing symbol (NULL at module level); target_id: set by resolution.
CREATE TABLE edges(
    repo_id INTEGER NOT NULL, id BIGINT NOT NULL, file_id BIGINT NOT NULL,
    kind TEXT NOT NULL, source_id BIGINT, target_name TEXT NOT NULL, target_id BIGINT,
    resolution TEXT NOT NULL DEFAULT 'unresolved', line INTEGER NOT NULL, chunk_id BIGINT,
    PRIMARY KEY(repo_id, id)
) PARTITION BY LIST (repo_id);
CREATE INDEX edges_of_file ON edges(repo_id, file_id, kind, line);
CREATE INDEX edges_by_source ON edges(repo_id, source_id);
CREATE INDEX edges_by_target ON edges(repo_id, target_id);
CREATE INDEX edges_by_name ON edges(repo_id, target_name);
CREATE INDEX edges_by_chunk ON edges(repo_id, chunk_id);
"""


def _shifted(column: str, repo: str = "repo_id") -> str:
    """An id of version 6 (one sequence for all repositories) as version 7's: its repository's range."""
    return f"(({repo}::bigint << {REPO_ID_SHIFT}) | {column})"


def partition_by_repository(db: psycopg.Connection) -> None:
    """Version 6 → 7: the same rows, in a partition per repository, ids moved into each
    repository's range (references move with them: they never leave their repository)."""
    largest = db.execute("""SELECT greatest((SELECT max(id) FROM files), (SELECT max(id) FROM chunks),
                                            (SELECT max(id) FROM symbols), (SELECT max(id) FROM edges))""").fetchone()
    if largest and largest[0] is not None and largest[0] >> REPO_ID_SHIFT:
        raise RuntimeError(f"row id {largest[0]} does not fit version 7's per-repository ranges")
    dim = db.execute("SELECT value FROM settings WHERE key = 'model_dim'").fetchone()
    for table in PARTITIONED:
        db.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(sql.Identifier(table), sql.Identifier(f"{table}_v6")))
    for index in ("chunks_file", "chunks_repo", "chunks_hash", "chunks_fts", "definitions_name", "definitions_chunk",
                  "embeddings_hnsw", "symbols_repo_name", "symbols_repo_key", "symbols_qualified", "symbols_file",
                  "symbols_fts", "edges_file", "edges_source", "edges_target", "edges_repo_name", "edges_chunk", "files_fts"):
        db.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))
    db.execute(PARTITIONED_TABLES)
    if dim:
        size_vector_column(db, int(dim[0]))
    for (repo_id,) in db.execute("SELECT id FROM repos").fetchall():
        create_partitions(db, int(repo_id))
    db.execute(f"""INSERT INTO files SELECT repo_id, {_shifted('id')}, path, size, mtime_ns, hash, kind, language,
                   skip_reason, fts FROM files_v6""")
    db.execute(f"""INSERT INTO chunks SELECT repo_id, {_shifted('id')}, {_shifted('file_id')}, start_line, end_line,
                   content_hash, text, embed_text, fts, mentions, unit_start, unit_end, unit_name FROM chunks_v6""")
    db.execute(f"""INSERT INTO definitions SELECT c.repo_id, {_shifted('d.chunk_id', 'c.repo_id')},
                   {_shifted('c.file_id', 'c.repo_id')}, d.name, d.spelled
                   FROM definitions_v6 d JOIN chunks_v6 c ON c.id = d.chunk_id""")
    db.execute("""INSERT INTO embeddings SELECT DISTINCT ON (c.repo_id, e.content_hash) c.repo_id, e.content_hash, e.embedding
                  FROM embeddings_v6 e JOIN chunks_v6 c ON c.content_hash = e.content_hash""")
    db.execute(f"""INSERT INTO symbols SELECT repo_id, {_shifted('id')}, {_shifted('file_id')}, name, name_key,
                   qualified_name, kind, start_line, end_line, signature, doc, decorators, parent, split, fts,
                   {_shifted('chunk_id')} FROM symbols_v6""")
    db.execute(f"""INSERT INTO edges SELECT repo_id, {_shifted('id')}, {_shifted('file_id')}, kind, {_shifted('source_id')},
                   target_name, {_shifted('target_id')}, resolution, line, {_shifted('chunk_id')} FROM edges_v6""")
    for table in PARTITIONED:
        db.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(f"{table}_v6")))


# Version 8: which words each repository's files hold, and in how many of them: what routes a search
# across every repository to the few whose files hold its words (the search's first stage; see
# `count_words`). Unpartitioned (a sharded database distributes it by repo_id like the rest), one
# row per repository and word, read by word.
REPOSITORY_WORDS = """
ALTER TABLE repos ADD COLUMN file_count INTEGER NOT NULL DEFAULT 0;
CREATE TABLE repo_words(
    repo_id INTEGER NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    word TEXT NOT NULL,
    files INTEGER NOT NULL,
    PRIMARY KEY (repo_id, word));
-- a search reads its words' rows from the index alone (a word's rows lie on as many pages as repositories hold it)
CREATE INDEX repo_words_by_word ON repo_words(word) INCLUDE (repo_id, files);
"""


def count_words(db: psycopg.Connection, repo_id: int) -> None:
    """A repository's words again, from its files' keyword vectors (PostgreSQL's own `ts_stat`:
    each word and the number of files holding it), with its file count: after each write that
    changed its files, and once for every repository by the migration. A recount reads every file
    of the repository, not only those that changed: 100-130 ms for a repository of 800-1,100 files
    on the 1,000-repository benchmark (0.9-1.4 s with its pages cold)."""
    partition = sql.Identifier(SCHEMA, partition_name("files", repo_id))
    db.execute("DELETE FROM repo_words WHERE repo_id = %s", (repo_id,))
    db.execute(sql.SQL("INSERT INTO repo_words(repo_id, word, files) SELECT %s, word, ndoc FROM ts_stat({})").format(
        sql.Literal(sql.SQL("SELECT fts FROM {} WHERE fts IS NOT NULL").format(partition).as_string(db))), (repo_id,))
    db.execute(sql.SQL("UPDATE repos SET file_count = (SELECT count(*) FROM {} WHERE fts IS NOT NULL) WHERE id = %s").format(partition),
               (repo_id,))


def add_repository_words(db: psycopg.Connection) -> None:
    """Version 7 → 8: the words table, filled for every repository already there."""
    db.execute(REPOSITORY_WORDS)
    for (repo_id,) in db.execute("SELECT id FROM repos ORDER BY id").fetchall():
        if db.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.{partition_name('files', int(repo_id))}",)).fetchone() != (None,):
            count_words(db, int(repo_id))


MIGRATIONS: tuple[str | Callable[[psycopg.Connection], None], ...] = (
    *TEXT_MIGRATIONS, partition_by_repository, add_repository_words)
SCHEMA_VERSION = len(MIGRATIONS)


def partition_name(table: str, repo_id: int) -> str:
    return f"{table}_r{repo_id}"


def first_id(repo_id: int) -> int:
    return repo_id << REPO_ID_SHIFT


def repositories_of(ids: object) -> list[int]:
    """The repositories rows with these ids belong to (their ids say it), so a lookup by id reads
    only their partitions."""
    return sorted({int(i) >> REPO_ID_SHIFT for i in ids})  # type: ignore[attr-defined]


def size_vector_column(db: psycopg.Connection, dim: int) -> None:
    """The vector column sized for the bound model, with an HNSW index every partition inherits."""
    db.execute("DROP INDEX IF EXISTS embeddings_hnsw")
    db.execute(sql.SQL("ALTER TABLE embeddings ALTER COLUMN embedding TYPE vector({})").format(sql.Literal(dim)))
    db.execute("CREATE INDEX embeddings_hnsw ON embeddings USING hnsw (embedding vector_cosine_ops)")


def create_partitions(db: psycopg.Connection, repo_id: int) -> None:
    """A repository's partition of each table. Made as a table of the parent's shape, then
    attached: attaching locks the parent against other attachments only, where CREATE TABLE …
    PARTITION OF would block every search until the writer's transaction commits."""
    for table in PARTITIONED:
        name = sql.Identifier(partition_name(table, repo_id))
        db.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (LIKE {} INCLUDING DEFAULTS)").format(name, sql.Identifier(table)))
        attached = db.execute("SELECT 1 FROM pg_inherits WHERE inhrelid = %s::regclass",
                              (f"{SCHEMA}.{partition_name(table, repo_id)}",)).fetchone()
        if not attached:
            db.execute(sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES IN ({})").format(
                sql.Identifier(table), name, sql.Literal(repo_id)))


def drop_partitions(db: psycopg.Connection, repo_id: int) -> None:
    """Detach (concurrently: searches of other repositories go on) and drop a repository's
    partitions; run outside a transaction, after its `repos` row is gone."""
    for table in PARTITIONED:
        name = partition_name(table, repo_id)
        attached = db.execute("SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(%s)", (f"{SCHEMA}.{name}",)).fetchone()
        if attached:
            db.execute(sql.SQL("ALTER TABLE {} DETACH PARTITION {} CONCURRENTLY").format(
                sql.Identifier(table), sql.Identifier(name)))
        db.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))


def orphan_partitions(db: psycopg.Connection) -> list[int]:
    """Repositories whose partitions outlived their row (a drop stopped half-way)."""
    rows = db.execute(
        """SELECT DISTINCT substring(c.relname from '_r([0-9]+)$')::int FROM pg_class c
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname ~ %s""",
        (SCHEMA, "^(" + "|".join(PARTITIONED) + ")_r[0-9]+$"),
    ).fetchall()
    known = {int(r[0]) for r in db.execute("SELECT id FROM repos")}
    return sorted(int(r[0]) for r in rows if int(r[0]) not in known)


def migrate_step(db: psycopg.Connection, step: int) -> None:
    log.info("migrating the codewhere schema to version %d", step + 1)
    migration = MIGRATIONS[step]
    if callable(migration):
        migration(db)
    else:
        db.execute(migration)
