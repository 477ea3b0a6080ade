"""The thread page on long threads: newest first, windows by seq both ways, jumps, collapsing."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.models import Block
from sessions_app.threads.services import thread_save_agent_state

from ..conftest import login_client
from .helpers import turns

pytestmark = pytest.mark.django_db


def save(user, thread_id, context):
    return thread_save_agent_state(actor=user, thread_id=thread_id, agent_code="agent", context=context)


def seqs(body: str) -> list[int]:
    return [int(n) for n in re.findall(r'id="seq-(\d+)"', body)]


@pytest.fixture
def long_thread(alice):
    save(alice, "t1", turns(450))
    return "t1"


def test_the_newest_blocks_come_first_with_older_ones_a_click_away(client, alice, long_thread):
    body = login_client(client, alice).get("/threads/t1/").content.decode()
    assert seqs(body) == list(range(450, 250, -1))
    assert "before=251" in body and "Load older" in body and "Load newer" not in body
    older = client.get("/threads/t1/?tab=active&before=251", HTTP_HX_REQUEST="true").content.decode()
    assert seqs(older) == list(range(250, 50, -1)) and "before=51" in older and "<html" not in older
    assert "Load newer" not in older  # the fragment continues in the direction it was asked for
    last = client.get("/threads/t1/?tab=active&before=51", HTTP_HX_REQUEST="true").content.decode()
    assert seqs(last) == list(range(50, 0, -1)) and "Load older" not in last


def test_a_window_around_a_seq_pages_both_ways(client, alice, long_thread):
    body = login_client(client, alice).get("/threads/t1/?around=300").content.decode()
    shown = seqs(body)
    assert 300 in shown and len(shown) == 200 and shown == sorted(shown, reverse=True)
    assert f"after={max(shown)}" in body and f"before={min(shown)}" in body
    newer = client.get(f"/threads/t1/?tab=active&after={max(shown)}", HTTP_HX_REQUEST="true").content.decode()
    assert seqs(newer) == list(range(450, max(shown), -1)) and "Load newer" not in newer


def test_jump_to_a_seq_or_a_time(client, alice, long_thread):
    login_client(client, alice)
    assert 9 in seqs(client.get("/threads/t1/?jump=%239").content.decode())
    block = Block.objects.get(thread__thread_id="t1", seq=40)
    Block.objects.filter(thread__thread_id="t1", seq__lt=40).update(created_at=block.created_at - timedelta(hours=2))
    moment = timezone.localtime(block.created_at - timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S")
    assert 40 in seqs(client.get("/threads/t1/", {"jump": moment}).content.decode())
    bad = client.get("/threads/t1/", {"jump": "yesterday-ish"})
    assert bad.status_code == 200 and "neither a seq" in bad.content.decode()  # the form stays, with the error


@pytest.mark.parametrize("name", ["before", "after", "around"])
def test_a_cursor_that_is_not_a_seq_is_a_400_naming_it(client, alice, long_thread, name):
    response = login_client(client, alice).get(f"/threads/t1/?{name}=x1")
    assert response.status_code == 400 and name in response.content.decode()


def test_the_oldest_first_order_is_a_toggle(client, alice, long_thread):
    body = login_client(client, alice).get("/threads/t1/?order=oldest").content.decode()
    assert seqs(body)[:3] == [1, 2, 3] and "after=200" in body


def test_archived_blocks_page_older_and_newer_the_right_way(client, alice):
    for round_ in range(3):
        save(alice, "t1", turns(150, prefix=f"r{round_}"))
    body = login_client(client, alice).get("/threads/t1/?tab=archived").content.decode()
    shown = seqs(body)
    assert shown == sorted(shown, reverse=True) and max(shown) == 300
    older_link = re.search(r'href="\?tab=archived&amp;order=newest&amp;before=(\d+)">Older archived', body)
    assert older_link and int(older_link.group(1)) == min(shown)
    older = seqs(client.get(f"/threads/t1/?tab=archived&before={older_link.group(1)}").content.decode())
    assert older and max(older) < min(shown)  # older really is older


@pytest.mark.parametrize("size", [10, 1000])
def test_windows_cost_the_same_queries_whatever_the_length(client, alice, size, django_assert_num_queries):
    save(alice, "t1", turns(size))
    login_client(client, alice)
    middle = size // 2
    # session, user, role, thread, the two sides of the window
    with django_assert_num_queries(6):
        assert client.get(f"/threads/t1/?around={middle}").status_code == 200
    with django_assert_num_queries(6):
        assert client.get(f"/threads/t1/?before={middle}").status_code == 200


def test_long_messages_collapse_and_non_text_parts_show_as_what_they_are(client, alice):
    save(alice, "t1", [
        {"role": "user", "content": "word " * 600},
        {"role": "user", "content": [
            {"type": "text", "text": "look at this"},
            {"type": "image_url", "image_url": {"url": "https://agent.example/cat.png"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        ]},
    ])
    body = login_client(client, alice).get("/threads/t1/").content.decode()
    assert '<details class="long">' in body and "Show all (3000 characters)" in body
    assert "[image · linked, not loaded]" in body and "[image · image/png]" in body
    assert "<img" not in body and "iVBORw0KGgo=" not in body.split("JSON as posted")[0]
