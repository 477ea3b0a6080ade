"""What the saver keeps of each thread's latest checkpoint for its conditional read, without a server:
the request it makes, the tuple a 304 gives back, and the bound on what it keeps."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from memoryadmin_client.langgraph.codec import contents_of
from memoryadmin_client.langgraph.saver import MemoryAdminSaver
from memoryadmin_client.langgraph.steps import ThreadMemory, _Latest, _Sent


def saver() -> MemoryAdminSaver:
    return MemoryAdminSaver("http://127.0.0.1:9", "key", retries=0)


def latest(thread_id: str, size: int, messages=None) -> _Latest:
    sent = _Sent("c-1", "messages", messages[:], contents_of(messages), "head") if messages is not None else None
    rest = {"v": 4, "id": "c-1", "ts": "2026-12-04T00:00:00+00:00", "channel_values": {"step": 3},
            "channel_versions": {"step": "3"}, "versions_seen": {}}
    return _Latest(thread_id, "c-1", '"s1"', "c-0", rest, {"source": "loop", "step": 3}, sent, size)


def config(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


def test_the_read_of_a_held_latest_checkpoint_carries_its_tag_and_a_304_gives_it_back():
    s, messages = saver(), [HumanMessage("hi", id="h-1"), AIMessage("hello", id="a-1")]
    s._memory.keep_latest(latest("t", 100, messages))
    call, held = s._tuple_request(config("t"))
    assert call.headers == {"If-None-Match": '"s1"'} and held is not None
    found = s._tuple_held(held)
    assert found.checkpoint["channel_values"] == {"step": 3, "messages": messages}
    assert found.checkpoint["channel_values"]["messages"] is not messages  # a list of its own
    assert found.metadata == {"source": "loop", "step": 3} and found.pending_writes == []
    assert found.config["configurable"] == {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c-1"}
    assert found.parent_config["configurable"]["checkpoint_id"] == "c-0"
    # A read by id, or of a subgraph's namespace, is never conditional.
    assert s._tuple_request({"configurable": {"thread_id": "t", "checkpoint_id": "c-1"}})[0].headers is None
    assert s._tuple_request({"configurable": {"thread_id": "t", "checkpoint_ns": "sub:1"}})[0].headers is None


def test_a_message_edited_in_place_makes_the_read_unconditional():
    s, messages = saver(), [HumanMessage("hi", id="h-1")]
    s._memory.keep_latest(latest("t", 100, messages))
    messages[0].content = "edited"
    call, held = s._tuple_request(config("t"))
    assert call.headers is None and held is None


def test_what_is_kept_is_bounded_in_bytes_and_threads():
    memory = ThreadMemory(latest_bytes=1000)
    for i in range(4):
        memory.keep_latest(latest(f"t{i}", 240))
    assert memory.latest_threads() == ["t0", "t1", "t2", "t3"] and memory.latest_size() == 960
    memory.keep_latest(latest("t4", 240))  # over the budget: the oldest goes
    assert memory.latest_threads() == ["t1", "t2", "t3", "t4"] and memory.latest_size() == 960
    memory.keep_latest(latest("big", 251))  # over a quarter of the budget: not kept
    assert memory.latest("big") is None
    memory.keep_latest(latest("t2", 100))  # a thread's newer checkpoint replaces its older one
    assert memory.latest_threads()[-1] == "t2" and memory.latest_size() == 820
    memory.forget("t1")
    assert memory.latest("t1") is None and memory.latest_size() == 580
    memory.forget_latest("t3")
    assert memory.latest_threads() == ["t4", "t2"] and memory.latest_size() == 340
    memory.threads = 2
    memory.keep_latest(latest("t5", 10))
    assert memory.latest_threads() == ["t2", "t5"] and memory.latest_size() == 110


def test_the_messages_held_are_bounded_in_threads_and_forgotten_with_the_thread():
    memory = ThreadMemory(threads=2)
    sent = [_Sent(f"c-{i}", "messages", [HumanMessage(f"m{i}")], [f"m{i}"], f"h{i}") for i in range(3)]
    for i, one in enumerate(sent):
        memory.keep_sent(f"t{i}", one)
    assert memory.sent("t0") is None and memory.sent("t2") is sent[2]  # the least recently stored went
    memory.keep_putting("t2", sent[0])
    assert memory.held("t2") == [sent[2], sent[0]]
    memory.keep_putting("t1", _Sent("c-9", "messages", [], [], ""))
    assert memory.held("t1") == [sent[1]]  # a checkpoint without messages holds none to refer to
    memory.forget("t2")
    assert memory.sent("t2") is None and memory.held("t2") == [sent[0]]  # the put on its way stays
