"""The JSON viewer: a server-drawn tree of <details>, escaped, large values collapsed, on every page that shows JSON."""

from __future__ import annotations

import re

import pytest
from django.template import Context, Template

from memoryadmin.audit import audit_record
from memoryadmin.templatetags.jsontree import OPEN_NODES, STRING_PREVIEW, TREE_NODES, json_tree
from sessions_app.checkpoints import services as svc
from sessions_app.models import Thread
from store_app import services as store

from ..conftest import login_client
from ..ops.helpers import save, turns

HOSTILE = "</script><img src=x onerror=alert(1)>"


def test_keys_and_strings_are_escaped_and_the_copy_button_carries_the_json():
    html = str(json_tree({HOSTILE: [HOSTILE, 1, 2.5, True, None]}))
    assert "<img" not in html and "</script>" not in html
    assert html.count("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;") == 5  # key, value, the key list of the summary, and both in the copy text
    assert 'data-copy-text="{\n  &quot;&lt;/script&gt;' in html
    assert '<span class="json-number">2.5</span>' in html and "json-bool" in html and "json-null" in html


def test_small_values_open_large_ones_start_collapsed():
    small = str(json_tree({"a": {"b": 1}}))
    assert small.count("<details open>") == 2
    large = str(json_tree({"rows": list(range(OPEN_NODES + 5))}))
    assert large.startswith('<div class="json-tree">') and "<details open>" not in large
    assert "45 items" in large
    closed = str(json_tree({"a": 1}, collapsed=True))
    assert "<details open>" not in closed and "<details>" in closed


def test_long_strings_are_cut_with_the_rest_one_click_away_and_huge_values_stop_drawing():
    text = "word " * 200
    html = str(json_tree({"text": text}))
    assert 'class="json-long"' in html and f"{len(text)} characters" in html and text[:STRING_PREVIEW] in html
    huge = str(json_tree(list(range(TREE_NODES * 2))))
    assert f"… {TREE_NODES * 2 - TREE_NODES + 1} more not drawn" in huge
    assert len(re.findall(r"<li>", huge)) < TREE_NODES + 5


def test_the_tag_is_used_from_templates_and_needs_no_script():
    html = Template("{% load jsontree %}{% json_tree value %}").render(Context({"value": {"x": "<b>"}}))
    assert "<script" not in html and "style=" not in html and "&lt;b&gt;" in html


@pytest.mark.django_db
def test_hostile_content_is_inert_in_every_view_that_draws_json(client, alice, admin_user):
    """Extra state, checkpoint values and writes, store values, audit details: all drawn by the viewer, all escaped."""
    save(alice, "t1", turns(2), extra_state={HOSTILE: {"note": HOSTILE}}, extra_state_given=True)
    body = {"channel_values": {"plan": {HOSTILE: HOSTILE}}, "channel_versions": {}, "versions_seen": {}}
    svc.checkpoint_put(actor=alice, thread_id="t1", checkpoint_id="c1", data=svc.checkpoint_input(checkpoint=body, metadata={"why": HOSTILE}))
    svc.checkpoint_put_writes(actor=alice, thread_id="t1", checkpoint_id="c1",
                              data=svc.write_input(task_id="x", writes=[{"channel": "plan", "value": {"v": HOSTILE}}]))
    store.store_item_put(actor=alice, namespace=["notes", "alice"], key="k", value={HOSTILE: HOSTILE})
    audit_record(actor=admin_user, action="thread.clear", target="thread:t1", detail={"why": HOSTILE})
    login_client(client, admin_user)
    pages = {
        "state": client.get("/threads/t1/", {"tab": "state"}).content.decode(),
        "checkpoint": client.get("/threads/t1/checkpoints/", {"checkpoint": "c1"}).content.decode(),
        "store": client.get("/store/", {"ns": "notes.alice"}).content.decode(),
        "item": client.get("/store/item", {"ns": "notes.alice", "key": "k"}).content.decode(),
        "audit": client.get("/audit/").content.decode(),
    }
    for name, page in pages.items():
        assert 'class="json-tree"' in page, name
        assert "<img src=x" not in page and "</script><img" not in page, name
        assert "&lt;img src=x onerror=alert(1)&gt;" in page, name


@pytest.mark.django_db
def test_a_namespace_page_shows_every_value_collapsed(client, alice):
    for i in range(20):
        store.store_item_put(actor=alice, namespace=["big"], key=f"k{i}", value={"rows": [{"n": n, "text": "x" * 80} for n in range(60)]})
    login_client(client, alice)
    page = client.get("/store/", {"ns": "big"}).content.decode()
    assert page.count('class="json-tree"') == 20
    assert page.count('<ul class="json-root"><li><details><summary>') == 20  # each value closed at its root
    assert Thread.objects.count() == 0
