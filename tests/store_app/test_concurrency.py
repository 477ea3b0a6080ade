"""Concurrent first writes of one key: one owner, no error other than the loser's 403."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memoryadmin.errors import Forbidden
from store_app import services
from store_app.models import StoreItem
from tests.conftest import IS_POSTGRES

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason="needs concurrent writers (PostgreSQL row locks)"),
    pytest.mark.django_db(transaction=True),
]


def _race(writers):
    barrier = threading.Barrier(len(writers))
    outcomes: list[str] = []
    lock = threading.Lock()

    def write(user, value):
        try:
            barrier.wait()
            services.store_item_put(actor=user, namespace=["race"], key="k", value=value)
            result = "written"
        except Forbidden:
            result = "forbidden"
        except Exception as exc:  # noqa: BLE001 - any other error is what the test looks for
            result = f"error: {exc!r}"
        finally:
            connection.close()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=write, args=writer) for writer in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return sorted(outcomes)


def test_two_members_racing_for_a_new_key_leave_one_owner(alice, bob):
    outcomes = _race([(alice, {"by": "alice"}), (bob, {"by": "bob"})])
    assert outcomes == ["forbidden", "written"]
    item = StoreItem.objects.select_related("owner").get()
    assert item.value == {"by": item.owner.username}


def test_one_owner_racing_upserts_of_one_key_all_succeed(alice):
    outcomes = _race([(alice, {"n": n}) for n in range(6)])
    assert outcomes == ["written"] * 6
    assert StoreItem.objects.count() == 1


def test_eight_writers_putting_and_deleting_one_key_never_fail_and_the_last_wins(alice):
    """Last writer wins, no error: the put is one INSERT ... ON CONFLICT DO UPDATE, the delete a locked DELETE."""
    rounds = 25
    barrier = threading.Barrier(8)
    errors: list[str] = []
    lock = threading.Lock()

    def writer(n):
        try:
            for r in range(rounds):
                barrier.wait(timeout=30)
                if (n + r) % 3 == 0:
                    services.store_item_delete(actor=alice, namespace=["race"], key="k")
                else:
                    services.store_item_put(actor=alice, namespace=["race"], key="k", value={"n": n, "r": r},
                                            vectors={"text": [float(n), 1.0]}, dims=2)
        except Exception as exc:  # noqa: BLE001 - any error is what the test looks for
            with lock:
                errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    items = list(StoreItem.objects.all())
    assert len(items) <= 1
    if items:
        from store_app.models import StoreVector

        # The vectors are the surviving put's own: one, of the writer whose value won.
        [vector] = StoreVector.objects.filter(item=items[0])
        assert vector.vector[0] == items[0].value["n"]


def _waiting_on_a_lock(timeout: float = 10.0) -> bool:
    """Whether another backend of this database waits for a row lock (polled from this connection)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("second_brings_vectors", [False, True])
def test_a_put_waiting_on_another_put_replaces_the_vectors_that_put_committed(alice, second_brings_vectors):
    """A put that waited on another put's row lock replaces what that put committed, its vectors included.

    The first put (vectors [1, 0]) holds its transaction open after the upsert and its vectors;
    the second put of the key, without vectors (one statement on PostgreSQL, no transaction of
    its own) or with [0, 1], waits for that lock. Once the first commits, the item is the
    second's: its value, and its own vectors or none, never the first put's.
    """
    from django.db import transaction

    from store_app.models import StoreVector

    services.store_item_put(actor=alice, namespace=["race"], key="k", value={"by": "start"}, vectors={"text": [5.0, 5.0]}, dims=2)
    holding, release = threading.Event(), threading.Event()
    errors: list[str] = []

    def first():
        try:
            with transaction.atomic():
                services.store_item_put(actor=alice, namespace=["race"], key="k", value={"by": "first"}, vectors={"text": [1.0, 0.0]}, dims=2)
                holding.set()
                release.wait(timeout=30)
        except Exception as exc:  # noqa: BLE001 - any error is what the test looks for
            errors.append(repr(exc))
        finally:
            holding.set()
            connection.close()

    def second():
        try:
            extra = {"vectors": {"text": [0.0, 1.0]}, "dims": 2} if second_brings_vectors else {}
            services.store_item_put(actor=alice, namespace=["race"], key="k", value={"by": "second"}, **extra)
        except Exception as exc:  # noqa: BLE001
            errors.append(repr(exc))
        finally:
            connection.close()

    one, two = threading.Thread(target=first), threading.Thread(target=second)
    one.start()
    assert holding.wait(timeout=30)
    two.start()
    try:
        assert _waiting_on_a_lock(), "the second put did not wait for the first one's row lock"
    finally:
        release.set()
        one.join(timeout=30)
        two.join(timeout=30)
    assert errors == []
    item = StoreItem.objects.get()
    assert item.value == {"by": "second"}
    vectors = [list(v.vector) for v in StoreVector.objects.filter(item=item)]
    assert vectors == ([[0.0, 1.0]] if second_brings_vectors else [])
