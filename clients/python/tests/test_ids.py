"""Thread ids checked by the client before any request, and ids as URL path segments."""

from __future__ import annotations

import httpx
import pytest

from memoryadmin_client.agent_state import thread_id_validate
from memoryadmin_client.errors import MemoryAdminInvalid
from memoryadmin_client.ids import THREAD_ID_MAX, path_segment, thread_id_checked


@pytest.mark.parametrize("value", ["user/42", "a b", "ü", "x\n", "a" * (THREAD_ID_MAX + 1), "search", ".", "..", "", b"raw", None, True])
def test_ids_memoryadmin_cannot_keep_are_refused_naming_thread_id(value):
    with pytest.raises(MemoryAdminInvalid) as refused:
        thread_id_checked(value)
    assert list(refused.value.errors) == ["thread_id"] and refused.value.status_code == 400
    assert str(refused.value).startswith("refused before any request")


@pytest.mark.parametrize("value", ["user/42", "x\n", "search", ".", "..", "", "a" * (THREAD_ID_MAX + 1)])
def test_the_adapters_conversation_state_refuses_the_same_ids(value):
    """One rule for the LangGraph saver and the AgentScope and LangChain adapters, saying what it refuses."""
    with pytest.raises(ValueError, match='not "search", "." or ".."'):
        thread_id_validate(thread_id=value)
    assert thread_id_validate(thread_id="..a") == "..a"


@pytest.mark.parametrize("value, text", [("t-1", "t-1"), ("..a", "..a"), ("a" * THREAD_ID_MAX, "a" * THREAD_ID_MAX), (42, "42"), ("searching", "searching")])
def test_ids_memoryadmin_keeps_are_taken_as_their_text(value, text):
    assert thread_id_checked(value) == text


@pytest.mark.parametrize("value, segment", [("user/42", "user%2F42"), ("a b", "a%20b"), (".", "%2E"), ("..", "%2E%2E"), ("a.b", "a.b"), ("x\n", "x%0A")])
def test_path_segments_survive_httpx(value, segment):
    assert path_segment(value) == segment
    url = httpx.URL(f"http://h/api/v1/threads/{path_segment(value)}/checkpoints")
    assert url.raw_path.decode() == f"/api/v1/threads/{segment}/checkpoints"
