"""Optimistic concurrency on checkpoints: ETag on reads and replacements, If-Match on PUT."""

from __future__ import annotations

import pytest

from sessions_app.models import Checkpoint

pytestmark = pytest.mark.django_db
BASE = "/api/v1/threads/t1/checkpoints"


def push(client, checkpoint_id, body):
    response = client.post(BASE, {"checkpoint": body, "checkpoint_id": checkpoint_id}, format="json")
    assert response.status_code in (200, 201), response.content


def replace(client, checkpoint_id, body, **headers):
    return client.put(f"{BASE}/{checkpoint_id}", {"checkpoint": body}, format="json", **headers)


def stored(checkpoint_id="a"):
    return Checkpoint.objects.values("checkpoint", "updated_at").get(checkpoint_id=checkpoint_id)


def test_get_and_put_carry_an_etag_that_changes_with_the_checkpoint(alice_api):
    push(alice_api, "a", {"v": 1})
    etag = alice_api.get(f"{BASE}/a")["ETag"]
    assert etag.startswith('"') and alice_api.get(f"{BASE}/latest")["ETag"] == etag
    response = replace(alice_api, "a", {"v": 2})
    assert response.status_code == 200 and response["ETag"] != etag
    assert alice_api.get(f"{BASE}/a")["ETag"] == response["ETag"]


def test_each_checkpoint_has_its_own_etag(alice_api):
    push(alice_api, "a", {"v": 1})
    push(alice_api, "b", {"v": 1})
    etag_a = alice_api.get(f"{BASE}/a")["ETag"]
    assert alice_api.get(f"{BASE}/b")["ETag"] != etag_a
    replace(alice_api, "b", {"v": 2})
    assert alice_api.get(f"{BASE}/a")["ETag"] == etag_a  # another checkpoint's write leaves it


def test_a_replace_with_the_current_etag_goes_through_and_answers_the_new_one(alice_api):
    push(alice_api, "a", {"v": 1})
    etag = alice_api.get(f"{BASE}/a")["ETag"]
    response = replace(alice_api, "a", {"v": 2}, HTTP_IF_MATCH=etag)
    assert response.status_code == 200 and response["ETag"] not in ("", etag)
    assert stored()["checkpoint"] == {"v": 2}
    # The answer's ETag is the one to send next.
    assert replace(alice_api, "a", {"v": 3}, HTTP_IF_MATCH=response["ETag"]).status_code == 200


def test_a_stale_etag_is_412_and_writes_nothing(alice_api):
    push(alice_api, "a", {"v": 1})
    stale = alice_api.get(f"{BASE}/a")["ETag"]
    replace(alice_api, "a", {"v": 2})
    before = stored()
    response = replace(alice_api, "a", {"v": "from the other replica"}, HTTP_IF_MATCH=stale)
    assert response.status_code == 412
    assert response.json()["code"] == "precondition_failed" and "If-Match" in response.json()["errors"]
    assert stored() == before


def test_an_upsert_by_post_also_moves_the_etag(alice_api):
    push(alice_api, "a", {"v": 1})
    etag = alice_api.get(f"{BASE}/a")["ETag"]
    push(alice_api, "a", {"v": 2})
    assert replace(alice_api, "a", {"v": 3}, HTTP_IF_MATCH=etag).status_code == 412
    assert stored()["checkpoint"] == {"v": 2}


def test_two_replicas_with_the_same_etag_one_wins(alice_api):
    push(alice_api, "a", {"v": 1})
    etag = alice_api.get(f"{BASE}/a")["ETag"]
    replica_a = replace(alice_api, "a", {"v": "a"}, HTTP_IF_MATCH=etag)
    replica_b = replace(alice_api, "a", {"v": "b"}, HTTP_IF_MATCH=etag)
    assert (replica_a.status_code, replica_b.status_code) == (200, 412)
    assert stored()["checkpoint"] == {"v": "a"}


def test_if_match_star_needs_an_existing_checkpoint(alice_api):
    push(alice_api, "a", {"v": 1})
    response = replace(alice_api, "zzz", {"v": 1}, HTTP_IF_MATCH="*")
    assert response.status_code == 412 and response.json()["code"] == "precondition_failed"
    assert not Checkpoint.objects.filter(checkpoint_id="zzz").exists()
    assert replace(alice_api, "a", {"v": 2}, HTTP_IF_MATCH="*").status_code == 200
    assert stored()["checkpoint"] == {"v": 2}


def test_without_if_match_a_missing_checkpoint_is_still_404(alice_api):
    push(alice_api, "a", {"v": 1})
    assert replace(alice_api, "zzz", {"v": 1}).status_code == 404


def test_ownership_is_checked_before_the_precondition(alice_api, bob_api):
    push(alice_api, "a", {"v": 1})
    before = stored()
    assert replace(bob_api, "a", {"v": 2}, HTTP_IF_MATCH="*").status_code == 403
    assert stored() == before
