"""PostgreSQL's put of store items as one function: the upsert and the replaced items' vectors
deleted, in one round trip (store_app.puts, docs/store.md, rule ST4).

A put that brings no vectors is then one statement, which needs no transaction of its own: the
function is atomic as any statement is. The delete is a statement of its own inside the
function because it must see what the upsert waited for. Under READ COMMITTED every statement
of a volatile function reads the latest committed rows, whereas the parts of one statement (a
`WITH` of an upsert and a delete) share one snapshot: an upsert that waited on another put's
row lock would update the row that put left but not see the vectors it inserted, which would
stay on the item under this put's value.

The upsert is rule ST4's: an existing row is overwritten by its owner only (`WHERE`), a live
one keeps its `created_at`, an expired one starts anew; the rows come as one JSON array
(`n`, the order to lock them in; `p` namespace path; `d` depth; `k` key; `v` value; `t` TTL;
`e` expiry) so that the statement's text is the same for any number of puts. Each row written
comes back with its id, whether it was inserted (no vectors to replace), its new vectors
version and its created_at. A refused row does not come back. SQLite runs the same upsert
from store_app.puts inside a transaction.
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION store_items_put(p_owner bigint, p_now timestamptz, p_rows json)
RETURNS TABLE (put_id bigint, put_path text, put_key text, put_inserted boolean, put_version bigint, put_created timestamptz)
LANGUAGE plpgsql VOLATILE AS $function$
DECLARE
    replaced bigint[] := '{}';
BEGIN
    FOR put_id, put_path, put_key, put_inserted, put_version, put_created IN
        INSERT INTO store_app_storeitem AS item
            (owner_id, namespace_path, depth, key, value, ttl, expires_at, created_at, updated_at, vectors_version)
        SELECT p_owner, given.p, given.d, given.k, given.v, given.t, given.e, p_now, p_now,
               nextval('store_item_vectors_version_seq')
        FROM json_to_recordset(p_rows) AS given(n integer, p text, d smallint, k text, v jsonb, t interval, e timestamptz)
        ORDER BY given.n
        ON CONFLICT (namespace_path, key) DO UPDATE SET
            owner_id = excluded.owner_id,
            created_at = CASE WHEN item.expires_at IS NOT NULL AND item.expires_at <= excluded.updated_at
                              THEN excluded.created_at ELSE item.created_at END,
            value = excluded.value,
            ttl = excluded.ttl,
            expires_at = excluded.expires_at,
            updated_at = excluded.updated_at,
            vectors_version = excluded.vectors_version
        WHERE item.owner_id = excluded.owner_id
        RETURNING item.id, item.namespace_path, item.key, item.xmax = 0, item.vectors_version, item.created_at
    LOOP
        IF NOT put_inserted THEN
            replaced := replaced || put_id;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF cardinality(replaced) > 0 THEN
        DELETE FROM store_app_storevector WHERE item_id = ANY (replaced);
    END IF;
END
$function$
"""


def create_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)


def drop_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS store_items_put(bigint, timestamptz, json)")


class Migration(migrations.Migration):

    dependencies = [
        ('store_app', '0007_store_item_vectors_version'),
    ]

    operations = [
        migrations.RunPython(create_function, drop_function),
    ]
