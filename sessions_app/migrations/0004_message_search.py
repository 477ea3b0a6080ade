"""Full-text search over message content (sessions_app/search.py, docs/operations.md "Search").

PostgreSQL: a GIN expression index on `to_tsvector('simple', translate(content, '<>', '  '))`;
the search filters on the same expression, so the planner uses it. The angle brackets
become spaces because PostgreSQL's text-search parser reads markup as tags and drops
what it takes for a tag's body (agents post HTML, XML and code all the time). On a large existing table,
build it by hand first with `CREATE INDEX CONCURRENTLY IF NOT EXISTS …` (the same
statement, concurrently) and this migration then does nothing.

SQLite: an external-content FTS5 table kept in step with sessions_app_block by
triggers (the rows live once, in the block table; FTS5 keeps only its index).
Caveat: when a later migration makes Django rebuild the block table on SQLite
(an altered column), the triggers go with the old table; a test checks they exist
after every migration.
"""

from django.db import migrations


class RunSQLFor(migrations.RunSQL):
    """RunSQL on one database vendor only; a no-op elsewhere."""

    def __init__(self, vendor: str, *args, **kwargs):
        self.vendor = vendor
        super().__init__(*args, **kwargs)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == self.vendor:
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == self.vendor:
            super().database_backwards(app_label, schema_editor, from_state, to_state)


POSTGRES_INDEX = (
    "CREATE INDEX IF NOT EXISTS block_content_tsv_idx ON sessions_app_block "
    "USING gin (to_tsvector('simple'::regconfig, translate(content, '<>', '  ')))"
)

SQLITE_FTS = [
    "CREATE VIRTUAL TABLE sessions_app_block_fts USING fts5("
    "content, content='sessions_app_block', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER sessions_app_block_fts_ai AFTER INSERT ON sessions_app_block BEGIN "
    "INSERT INTO sessions_app_block_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER sessions_app_block_fts_ad AFTER DELETE ON sessions_app_block BEGIN "
    "INSERT INTO sessions_app_block_fts(sessions_app_block_fts, rowid, content) VALUES ('delete', old.id, old.content); END",
    "CREATE TRIGGER sessions_app_block_fts_au AFTER UPDATE OF content ON sessions_app_block BEGIN "
    "INSERT INTO sessions_app_block_fts(sessions_app_block_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "INSERT INTO sessions_app_block_fts(rowid, content) VALUES (new.id, new.content); END",
    # Index the blocks stored before this migration.
    "INSERT INTO sessions_app_block_fts(sessions_app_block_fts) VALUES ('rebuild')",
]

SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS sessions_app_block_fts_au",
    "DROP TRIGGER IF EXISTS sessions_app_block_fts_ad",
    "DROP TRIGGER IF EXISTS sessions_app_block_fts_ai",
    "DROP TABLE IF EXISTS sessions_app_block_fts",
]


class Migration(migrations.Migration):

    dependencies = [
        ("sessions_app", "0003_operations"),
    ]

    operations = [
        RunSQLFor("postgresql", POSTGRES_INDEX, "DROP INDEX IF EXISTS block_content_tsv_idx"),
        RunSQLFor("sqlite", SQLITE_FTS, SQLITE_DROP),
    ]
