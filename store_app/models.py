from __future__ import annotations

import array
import json
import sys

from django.conf import settings
from django.db import connections, models
from django.db.models import Q
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.jsonfield import StoredJSONField

from .namespaces import MAX_KEY_BYTES, MAX_PATH_BYTES, SEPARATOR, Namespace, namespace_to_path


class StoreItemQuerySet(models.QuerySet):
    def visible_to(self, user) -> "StoreItemQuerySet":
        """Members see their own items; operators and admins see every item (memoryadmin.policy)."""
        return policy.restrict(self, user)

    def live(self, now=None) -> "StoreItemQuerySet":
        """Items whose TTL has not run out: expired items are gone for every reader."""
        now = now or timezone.now()
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))

    def in_namespace(self, namespace: Namespace) -> "StoreItemQuerySet":
        return self.filter(namespace_path=namespace_to_path(namespace))

    def under(self, namespace: Namespace) -> "StoreItemQuerySet":
        """Items in the namespace or below it, matched by whole labels.

        ("a", "b") matches a.b and a.b.c, never a.bc. PostgreSQL: `path = p OR
        path LIKE 'p.%'` on the varchar_pattern_ops index (Django escapes "_", "%"
        and "\\" in p, so "user_1" never matches "userX1"). SQLite's LIKE
        ignores case, so there the same set is the range p. <= path < p/ ("/"
        follows "." in every encoding), which its binary-collated index serves.
        """
        if not namespace:
            return self
        path = namespace_to_path(namespace)
        if connections[self.db].vendor == "postgresql":
            below = Q(namespace_path__startswith=path + SEPARATOR)
        else:
            below = Q(namespace_path__gte=path + SEPARATOR, namespace_path__lt=path + "/")
        return self.filter(Q(namespace_path=path) | below)


class StoreItem(models.Model):
    """One long-term memory: (namespace, key) -> JSON object, owned by its first writer."""

    # No index of its own: the owner_* indexes below lead with owner.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="store_items", db_index=False
    )
    # The namespace's labels joined with "." (no label holds one): the text that
    # prefix scans match and indexes serve. `depth` is the number of labels.
    namespace_path = models.CharField(max_length=MAX_PATH_BYTES)
    depth = models.PositiveSmallIntegerField()
    key = models.CharField(max_length=MAX_KEY_BYTES)
    value = StoredJSONField()
    # The TTL as given (minutes in the API); each refresh moves expires_at to now + ttl.
    ttl = models.DurationField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # Which vectors the item has: every put writes a value never used before (a sequence on
    # PostgreSQL, random 63 bits on SQLite) in the transaction that replaces its vectors, so
    # (id, vectors_version) names one set of vectors for good and a process may keep them
    # (store_app.vectorcache). 0: rows from before migration 0007, or written without vectors.
    vectors_version = models.BigIntegerField(default=0, db_default=0, editable=False)

    objects = StoreItemQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["namespace_path", "key"], name="store_item_ns_key_uniq"),
        ]
        # PostgreSQL-only indexes (pattern ops, GIN on value, tsvector) are made by
        # migration 0002; these exist on every database.
        indexes = [
            models.Index(fields=["-updated_at", "-id"], name="store_item_updated_idx"),
            models.Index(fields=["owner", "-updated_at", "-id"], name="store_item_owner_updated_idx"),
            models.Index(fields=["owner", "namespace_path"], name="store_item_owner_path_idx"),
            models.Index(
                fields=["expires_at"], name="store_item_expires_idx", condition=Q(expires_at__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace_path}/{self.key}"

    @property
    def namespace(self) -> Namespace:
        return tuple(self.namespace_path.split(SEPARATOR))

    @property
    def target(self) -> str:
        """How the audit log names this item."""
        return item_target(self.namespace, self.key)

    @property
    def ttl_minutes(self) -> float | None:
        return self.ttl.total_seconds() / 60 if self.ttl is not None else None

    def is_expired(self, now=None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())


def item_target(namespace: Namespace, key: str) -> str:
    return f"store:{namespace_to_path(namespace)}/{key}"



def pgvector_installed(connection) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        return cursor.fetchone() is not None


_column_types: dict[str, str] = {}


def vector_column_type(connection) -> str:
    """What the vector column is: "vector" (pgvector's), "bytea", "_float4" (real[], before
    migration 0006) on PostgreSQL, "blob" on SQLite; looked up once per process and database."""
    if connection.vendor != "postgresql":
        return "blob"
    if connection.alias not in _column_types:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT udt_name FROM information_schema.columns WHERE table_name = %s AND column_name = 'vector'"
                " AND table_schema = ANY (current_schemas(false))",
                [StoreVector._meta.db_table],
            )
            row = cursor.fetchone()
            if row is None:  # not migrated yet: nothing to remember
                return "bytea"
            _column_types[connection.alias] = row[0]
    return _column_types[connection.alias]


class VectorField(models.Field):
    """A list of floats stored as float32. On PostgreSQL pgvector's `vector` when the
    extension is in the database as the column is made, else the float32 bytes (`bytea`),
    as on SQLite: little-endian whatever the machine, so that a search reads a vector
    with one copy (store_app.semantic). Reads give a list."""

    description = "A vector of float32 numbers"

    def db_type(self, connection) -> str:
        if connection.vendor == "postgresql":
            return "vector" if pgvector_installed(connection) else "bytea"
        return "blob"

    def get_db_prep_value(self, value, connection, prepared=False):
        if value is None:
            return None
        if connection.vendor == "postgresql" and vector_column_type(connection) in ("vector", "_float4"):
            return [float(number) for number in value]
        return vector_bytes(value)

    def from_db_value(self, value, expression, connection):
        if value is None or isinstance(value, list):
            return value
        if isinstance(value, str):  # pgvector's text form, "[0.1,0.2]"
            return [float(x) for x in json.loads(value)]
        return vector_from_bytes(bytes(value))


def vector_bytes(vector) -> bytes:
    """float32, little-endian whatever the machine, so a copied database file reads the same."""
    packed = array.array("f", vector)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def vector_array(data: bytes) -> array.array:
    packed = array.array("f")
    packed.frombytes(data)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed


def vector_from_bytes(data: bytes) -> list[float]:
    return vector_array(data).tolist()


class StoreVector(models.Model):
    """The embedding of one indexed field of an item, as LangGraph keeps one per field path.

    `path` names the field ("$" for the whole value, "text", "tags.0" for the first
    of several texts at "tags[*]"); `norm` is the vector's length, kept so that a
    search divides instead of recomputing it for every candidate. Vectors of
    different `dims` come from different embedders and are never compared.
    """

    # The unique (item, path) constraint's index leads with item_id and serves the join.
    item = models.ForeignKey(StoreItem, on_delete=models.CASCADE, related_name="vectors", db_index=False)
    # The item's namespace (it never changes): a search reads the vectors of its
    # prefix through their own index (migration 0005, PostgreSQL) instead of
    # looking each candidate's up.
    namespace_path = models.CharField(max_length=MAX_PATH_BYTES)
    path = models.CharField(max_length=320)
    dims = models.PositiveSmallIntegerField()
    norm = models.FloatField()
    vector = VectorField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "path"], name="store_vector_item_path_uniq")]

    def __str__(self) -> str:
        return f"{self.item_id}:{self.path} ({self.dims})"
