"""The saver's step decision and the async encoding turns, without a server."""

from __future__ import annotations

import asyncio
import sys
import time

from langchain_core.messages import AIMessage, HumanMessage
from passes import LoopPasses

from memoryadmin_client import turns
from memoryadmin_client.langgraph.codec import contents_of
from memoryadmin_client.turns import Turn
from memoryadmin_client.langgraph.saver import _kept, _Sent


def conversation(n: int) -> list:
    return [(HumanMessage if i % 2 == 0 else AIMessage)(content=f"message {i}", id=f"m-{i}") for i in range(n)]


def sent_of(messages: list, checkpoint_id: str = "c-1") -> _Sent:
    return _Sent(checkpoint_id, "messages", messages[:], contents_of(messages), "head")


def test_a_step_adding_messages_to_the_same_ones_goes_as_a_delta():
    held = conversation(5)
    sent = sent_of(held)
    count, contents = _kept(sent, "c-1", [*held, AIMessage("new", id="m-5")])
    assert count == 5 and contents == [m.content for m in held]


def test_an_equal_message_made_anew_still_counts_as_held():
    held = conversation(3)
    again = [held[0], HumanMessage(content="message 1", id="m-1"), held[2]]  # type differs: not equal
    assert _kept(sent_of(held), "c-1", again)[0] is None
    same = [held[0], AIMessage(content="message 1", id="m-1"), held[2], HumanMessage("more")]
    assert _kept(sent_of(held), "c-1", same)[0] == 3


def test_a_message_edited_in_place_replaced_removed_or_another_parent_sends_the_step_whole():
    held = conversation(4)
    sent = sent_of(held)
    assert _kept(sent, "c-0", [*held])[0] is None  # another parent
    assert _kept(sent, "c-1", held[:3])[0] is None  # fewer messages than held
    assert _kept(sent, "c-1", [held[0], AIMessage("other", id="x"), *held[2:]])[0] is None
    held[2].content = "edited"
    assert _kept(sent, "c-1", [*held])[0] is None
    assert _kept(None, "c-1", [*held]) == (None, [])


def test_the_check_makes_no_python_call_per_held_message():
    """A step on a long thread: the comparison of the 10 000 messages held runs in C."""
    held = conversation(10_000)
    sent = sent_of(held)
    step = [*held, AIMessage("new", id="new")]
    calls = []

    def profile(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        count, _ = _kept(sent, "c-1", step)
    finally:
        sys.setprofile(None)
    assert count == 10_000
    assert len(calls) < 10, calls


def test_encodings_ready_at_once_are_spread_over_the_loops_passes(monkeypatch):
    monkeypatch.setattr(turns, "TURN_BUDGET", 0.002)
    passes = LoopPasses()
    entered: list[int] = []

    async def main():
        passes.start()

        async def step():
            async with Turn():
                entered.append(passes.count)
                spin = time.thread_time()
                while time.thread_time() - spin < 0.0012:  # an encoding's CPU
                    pass

        await asyncio.gather(*(step() for _ in range(10)))
        passes.stop()

    asyncio.run(main())
    per_pass = {p: entered.count(p) for p in entered}
    # 1.2 ms each, 2 ms a pass: at most two in a pass, so ten take at least five passes.
    assert max(per_pass.values()) <= 2 and len(per_pass) >= 5, per_pass


def test_a_lone_encoding_does_not_wait():
    async def main():
        loop = asyncio.get_running_loop()
        passes = [0]
        loop.call_soon(lambda: passes.__setitem__(0, 1))
        async with Turn():
            return passes[0]

    assert asyncio.run(main()) == 0  # entered in the same pass, before anything else ran


def test_an_async_step_encoded_in_turns_is_the_body_the_sync_put_sends():
    from langgraph.checkpoint.base import empty_checkpoint

    from memoryadmin_client.langgraph import MemoryAdminSaver

    saver = MemoryAdminSaver("http://127.0.0.1:9", "ma_key")  # nothing is sent
    messages = [*conversation(130), {"role": "user", "content": b"bytes"}, ("a", "tuple")]  # a blob, a tuple
    checkpoint = {**empty_checkpoint(), "id": "c-1", "channel_values": {"messages": messages, "step": 3, "n": 1.5}}
    config = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
    metadata = {"source": "loop", "step": 3}
    sync = saver._put_request(config, checkpoint, metadata)
    put = asyncio.run(saver._aput_request(config, checkpoint, metadata))
    assert put.call.content == sync.call.content
    assert b'"$blob"' in sync.call.content and sync.delta is False
