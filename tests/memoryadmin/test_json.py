"""The API's JSON renderer: orjson, with the standard encoder for what orjson cannot write."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memoryadmin.json import ORJSONRenderer


def test_it_writes_integers_beyond_64_bits():
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    body = ORJSONRenderer().render({"n": 10**20, "at": at, 3: "int key"})
    assert json.loads(body) == {"n": 10**20, "at": "2026-01-02T03:04:05Z", "3": "int key"}
    # The ordinary path answers the same shape.
    assert json.loads(ORJSONRenderer().render({"n": 1, "at": at})) == {"n": 1, "at": "2026-01-02T03:04:05Z"}


def test_what_neither_encoder_can_write_is_still_an_error():
    with pytest.raises(TypeError):
        ORJSONRenderer().render({"x": object()})


@pytest.mark.django_db
def test_big_numbers_in_stored_json_read_back(alice_api):
    # PostgreSQL's jsonb turns 1e20 into the integer 100000000000000000000 on the way back.
    metadata = {"big": 1e20, "edge": 18446744073709551616.0, "small": -1e19}
    response = alice_api.post("/api/v1/threads", {"thread_id": "big", "metadata": metadata}, format="json")
    assert response.status_code == 201
    for answer in (response, alice_api.get("/api/v1/threads/big"), alice_api.patch("/api/v1/threads/big", {}, format="json")):
        assert answer.status_code in (200, 201)
        assert {key: float(value) for key, value in answer.json()["metadata"].items()} == metadata
