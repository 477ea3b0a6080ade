"""What the saver keeps of each thread's latest checkpoint for its conditional read, without a server:
the request it makes, the tuple a 304 gives back, and the bound on what it keeps."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from memoryadmin_client.langgraph import saver as saver_module
from memoryadmin_client.langgraph.codec import contents_of
from memoryadmin_client.langgraph.saver import MemoryAdminSaver, _Latest, _Sent


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
    s._keep_latest(latest("t", 100, messages))
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
    s._keep_latest(latest("t", 100, messages))
    messages[0].content = "edited"
    call, held = s._tuple_request(config("t"))
    assert call.headers is None and held is None


def test_what_is_kept_is_bounded_in_bytes_and_threads(monkeypatch):
    monkeypatch.setattr(saver_module, "LATEST_BYTES", 1000)
    s = saver()
    for i in range(4):
        s._keep_latest(latest(f"t{i}", 240))
    assert list(s._latest) == ["t0", "t1", "t2", "t3"] and s._latest_bytes == 960
    s._keep_latest(latest("t4", 240))  # over the budget: the oldest goes
    assert list(s._latest) == ["t1", "t2", "t3", "t4"] and s._latest_bytes == 960
    s._keep_latest(latest("big", 251))  # over a quarter of the budget: not kept
    assert "big" not in s._latest
    s._keep_latest(latest("t2", 100))  # a thread's newer checkpoint replaces its older one
    assert list(s._latest)[-1] == "t2" and s._latest_bytes == 820
    s._forget("t1")
    assert "t1" not in s._latest and s._latest_bytes == 580
    monkeypatch.setattr(saver_module, "REMEMBERED_THREADS", 2)
    s._keep_latest(latest("t5", 10))
    assert list(s._latest) == ["t2", "t5"] and s._latest_bytes == 110
