"""Thousands of messages in one request: more parameters than PostgreSQL's protocol binds to one
statement (65 535; seven a block) are bound in the client instead (memoryadmin/postgres/prepared.py),
so a long conversation sent at once is stored as any other."""

from __future__ import annotations

import pytest

from sessions_app.checkpoints import latest
from sessions_app.models import Block, Thread
from sessions_app.threads.services import thread_save_agent_state

from .test_checkpoint_fastpath import put
from .test_langgraph_conversation_api import conversation

pytestmark = pytest.mark.django_db(transaction=True)
LONG = 9_500  # 66 500 parameters in the append of its blocks


def test_a_checkpoint_of_thousands_of_messages_then_a_delta_of_thousands_more(alice):
    first = put(alice, "long", "c0", 1, messages=conversation(LONG))  # a new thread: the general path
    more = conversation(2 * LONG)[LONG:]
    answer = put(alice, "long", "c1", 2, delta={"head": first.messages["head"], "append": more}, parent="c0")
    assert answer.messages["count"] == 2 * LONG
    assert Thread.objects.get(thread_id="long").active_count == Block.objects.filter(thread__thread_id="long").count() == 2 * LONG
    found = latest.checkpoint_latest(actor=alice, thread_id="long")
    assert found.checkpoint["channel_values"]["messages"] == conversation(2 * LONG)


def test_a_conversation_save_of_thousands_of_messages(alice):
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(LONG)]
    thread_save_agent_state(actor=alice, thread_id="saved", agent_code="a", context=messages)
    thread_save_agent_state(actor=alice, thread_id="saved", agent_code="a", context=messages + messages)
    assert Thread.objects.get(thread_id="saved").active_count == 2 * LONG
