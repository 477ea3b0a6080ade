"""Optimistic concurrency on agent-state: ETag on reads and saves, If-Match on saves."""

from __future__ import annotations

import pytest

from sessions_app.models import Block, Thread

from .helpers import turns

pytestmark = pytest.mark.django_db
URL = "/api/v1/threads/t1/agent-state"


def put(client, context, **headers):
    return client.put(URL, {"agent_code": "bot", "context": context}, format="json", **headers)


def test_get_and_put_carry_an_etag_that_changes_with_the_state(alice_api):
    first = put(alice_api, turns(2))
    etag = first["ETag"]
    assert etag.startswith('"') and alice_api.get(URL)["ETag"] == etag
    assert put(alice_api, turns(2))["ETag"] == etag  # a no-op keeps it
    assert put(alice_api, turns(4))["ETag"] != etag


def test_a_save_with_the_current_etag_goes_through(alice_api):
    etag = put(alice_api, turns(2))["ETag"]
    response = put(alice_api, turns(4), HTTP_IF_MATCH=etag)
    assert response.status_code == 200 and response.json()["appended"] == 2


def test_a_stale_etag_is_412_and_writes_nothing(alice_api):
    stale = put(alice_api, turns(2))["ETag"]
    put(alice_api, turns(4))
    before = list(Block.objects.values_list("seq", "archived"))
    response = put(alice_api, [{"role": "user", "content": "from the other replica"}], HTTP_IF_MATCH=stale)
    assert response.status_code == 412
    assert response.json()["code"] == "precondition_failed"
    assert list(Block.objects.values_list("seq", "archived")) == before


def test_two_replicas_with_the_same_etag_one_wins(alice_api):
    etag = put(alice_api, turns(2))["ETag"]
    replica_a = put(alice_api, turns(2) + [{"role": "user", "content": "a"}], HTTP_IF_MATCH=etag)
    replica_b = put(alice_api, turns(2) + [{"role": "user", "content": "b"}], HTTP_IF_MATCH=etag)
    assert (replica_a.status_code, replica_b.status_code) == (200, 412)
    assert alice_api.get(URL).json()["context"][-1]["content"] == "a"


def test_if_match_star_needs_an_existing_thread(alice_api):
    assert put(alice_api, turns(2), HTTP_IF_MATCH="*").status_code == 412
    assert not Thread.objects.exists()
    put(alice_api, turns(2))
    assert put(alice_api, turns(4), HTTP_IF_MATCH="*").status_code == 200


def test_extra_state_changes_move_the_etag(alice_api):
    etag = put(alice_api, turns(2))["ETag"]
    response = alice_api.put(URL, {"agent_code": "bot", "context": turns(2), "extra_state": {"plan": 1}}, format="json")
    assert response["ETag"] != etag
    assert put(alice_api, turns(2), HTTP_IF_MATCH=etag).status_code == 412
