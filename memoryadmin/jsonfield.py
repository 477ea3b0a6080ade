"""The model field for agents' JSON: numbers stored as posted, reads that never fail.

A JSONField whose text to the database is `memoryadmin.json.db_text` (doubles kept as
doubles by PostgreSQL's jsonb) and whose text from it is read by
`memoryadmin.json.stored_loads` (integers exact at any length, nesting beyond
SHOWN_DEPTH_MAX cut and marked rather than a RecursionError in some later walk).
"""

from __future__ import annotations

import json
from typing import Any

from django.db import models
from django.db.models.fields.json import KeyTransform

from memoryadmin.json import db_text, stored_loads


class _StoredText(json.JSONEncoder):
    """What Django's JSONField calls to make its text (`json.dumps(value, cls=...)`)."""

    def encode(self, o: Any) -> str:
        return db_text(o)


class StoredJSONField(models.JSONField):
    """JSONField for what agents post (messages, state, checkpoints, store values)."""

    def __init__(self, *args, **kwargs):
        kwargs["encoder"] = _StoredText
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        # To the schema this is a JSONField (the same column and the same lookups): only the
        # text that goes in and comes out differs, which no migration has to know about.
        name, _path, args, kwargs = super().deconstruct()
        kwargs.pop("encoder", None)
        return name, "django.db.models.JSONField", args, kwargs

    def from_db_value(self, value, expression, connection):
        if value is None:
            return value
        # As JSONField: a key read by SQLite's json_extract may come as an SQL scalar.
        if isinstance(expression, KeyTransform) and not isinstance(value, str):
            return value
        try:
            return stored_loads(value)
        except ValueError:
            return value
