"""docs/integrations/spring-ai-alibaba.md: every request of the page, in order, against a live server.

The page's examples are the mapping of Spring AI Alibaba's BaseCheckpointSaver and
Store to memoryadmin's REST calls; here each one is sent and its answer held to
what the page shows (rules D1–D4 of doc_examples), then the rows are checked.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from memoryadmin.apikeys import apikey_create
from sessions_app.models import Checkpoint, Thread
from store_app.models import StoreItem

from ..conftest import make_user
from .doc_examples import Answer, Example, Memory, Request, examples_of, run_example

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "spring-ai-alibaba.md"


def test_the_page_has_both_mappings_and_examples_for_each_method():
    examples = examples_of(page=PAGE)
    calls = {(e.request.method, e.request.path.split("?")[0]) for e in examples}
    for call in [
        ("POST", "/api/v1/threads/wf-1/checkpoints"),
        ("GET", "/api/v1/threads/wf-1/checkpoints/latest"),
        ("PUT", "/api/v1/threads/wf-1/checkpoints/6f1c2a3e-0002-4b7a-9a51-5d2c7e9b0a11"),
        ("GET", "/api/v1/threads/wf-1/checkpoints"),
        ("POST", "/api/v1/threads/wf-1/release"),
        ("DELETE", "/api/v1/threads/wf-2/checkpoints"),
        ("PUT", "/api/v1/store/items"),
        ("GET", "/api/v1/store/items"),
        ("DELETE", "/api/v1/store/items"),
        ("POST", "/api/v1/store/items/search"),
        ("POST", "/api/v1/store/namespaces"),
    ]:
        assert call in calls, call
    text = PAGE.read_text(encoding="utf-8")
    for method in ("`put(config, checkpoint)`", "`get(config)`", "`list(config)`", "`release(config)`",
                   "`putItem(item)`", "`getItem(namespace, key)`", "`deleteItem(namespace, key)`",
                   "`searchItems(request)`", "`listNamespaces(request)`"):
        assert method in text, method


def test_every_example_answers_as_the_page_shows(live_server, alice, bob):
    admin = make_user("root", "admin")
    memory = Memory(
        values={
            "key": apikey_create(owner=alice).plaintext,
            "other_key": apikey_create(owner=bob).plaintext,
            "admin_key": apikey_create(owner=admin).plaintext,
        }
    )
    examples = examples_of(page=PAGE)
    with httpx.Client(timeout=30) as client:
        for example in examples:
            run_example(example=example, base_url=live_server.url, memory=memory, client=client)
    assert len(examples) == 23
    # What the examples say they did is what the database holds.
    assert Thread.objects.get(thread_id="wf-1").owner == alice
    assert Checkpoint.objects.filter(thread__thread_id__in=["wf-1", "wf-2"]).count() == 0
    assert not Thread.objects.filter(thread_id="$default").exists()
    assert list(StoreItem.objects.values_list("namespace_path", "key", "owner__username")) == [
        ("users.alice.preferences", "language", "alice")
    ]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (201, {"checkpoint_id": "cp-drifted"}),
        (201, {"thread_id": "wf-9", "checkpoint_ns": "", "checkpoint_id": "cp-1", "node": "gone"}),
        (201, {"thread_id": ["wf-9"]}),
        (200, {"thread_id": "wf-9"}),
    ],
)
def test_an_example_that_drifted_from_the_api_fails(live_server, alice, status, body):
    memory = Memory(values={"key": apikey_create(owner=alice).plaintext})
    drifted = Example(
        line=1,
        request=Request(
            "POST", "/api/v1/threads/wf-9/checkpoints",
            {"Authorization": "Bearer {key}", "Content-Type": "application/json"},
            '{"checkpoint_id": "cp-1", "checkpoint": {"state": {}}}',
        ),
        answer=Answer(status, {}, body, True),
    )
    with httpx.Client(timeout=30) as client, pytest.raises(AssertionError):
        run_example(example=drifted, base_url=live_server.url, memory=memory, client=client)
