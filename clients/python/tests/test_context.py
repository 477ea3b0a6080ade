"""The context builder: memory injected first, history trimmed newest-first to a token budget."""

from __future__ import annotations

import pytest

from memoryadmin_client.context import (
    MEMORY_NOTICE,
    MESSAGE_OVERHEAD,
    TRUNCATION_MARKER,
    approx_tokens,
    build_context,
)


def msg(role, text):
    return {"role": role, "content": text}


def cost(text):
    return approx_tokens(text) + MESSAGE_OVERHEAD


HISTORY = [msg("system", "be brief"), *[msg("user" if i % 2 == 0 else "assistant", f"message {i:02d}") for i in range(10)]]


def test_tokens_are_a_quarter_of_the_utf8_bytes_rounded_up():
    assert approx_tokens("") == 0
    assert approx_tokens("abcd") == 1 and approx_tokens("abcde") == 2
    assert approx_tokens("記憶") == 2  # six bytes


def test_it_keeps_the_newest_messages_and_the_system_message():
    budget = cost("be brief") + 3 * cost("message 00")
    built = build_context(messages=HISTORY, budget=budget)
    assert [m.content for m in built.messages] == ["be brief", "message 07", "message 08", "message 09"]
    assert built.messages[0].source == "system" and built.dropped == 7
    assert built.total_tokens == budget


def test_everything_fits_in_a_large_budget():
    built = build_context(messages=HISTORY, budget=10_000)
    assert [m.content for m in built.messages] == [m["content"] for m in HISTORY] and built.dropped == 0


def test_an_oversized_single_message_is_cut_with_a_marker():
    long = "word " * 500
    built = build_context(messages=[msg("user", "old"), msg("user", long)], budget=50)
    assert len(built.messages) == 1
    only = built.messages[0]
    assert only.truncated and only.content.endswith(TRUNCATION_MARKER) and long.startswith(only.content[: -len(TRUNCATION_MARKER)])
    assert only.tokens <= 50 and built.dropped == 1


def test_an_oversized_system_message_is_cut_too():
    built = build_context(messages=[msg("system", "s" * 1000), msg("user", "hi")], budget=40)
    assert built.messages[0].source == "system" and built.messages[0].truncated
    assert built.total_tokens <= 40


def test_memory_comes_first_and_counts_against_the_budget():
    memories = [{"value": {"text": "likes tea"}, "score": 0.9}]
    built = build_context(messages=HISTORY, budget=200, memories=memories)
    assert built.messages[0].source == "memory" and "likes tea" in built.messages[0].content
    assert built.messages[1].source == "system" and built.memories_used == 1
    assert built.total_tokens <= 200


def test_a_memory_block_larger_than_the_budget_is_replaced_by_a_notice():
    memories = [{"value": {"text": "x" * 4000}, "score": 0.9}]
    built = build_context(messages=HISTORY, budget=60, memories=memories)
    assert built.messages[0].content == MEMORY_NOTICE and built.messages[0].source == "notice"
    assert built.memory_omitted and built.memories_used == 0
    assert built.messages[-1].content == "message 09" and built.total_tokens <= 60


def test_memories_below_min_score_are_left_out():
    memories = [{"value": {"text": "sure"}, "score": 0.8}, {"value": {"text": "doubtful"}, "score": 0.1}]
    built = build_context(messages=[], budget=100, memories=memories, min_score=0.5)
    assert "sure" in built.messages[0].content and "doubtful" not in built.messages[0].content
    assert built.memories_below_threshold == 1


def test_it_refuses_a_budget_that_is_not_positive():
    with pytest.raises(ValueError):
        build_context(messages=[], budget=0)


def test_langchain_roles_and_content_parts_are_read_as_text():
    messages = [
        msg("human", [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": "x"}]),
        msg("ai", None),
    ]
    built = build_context(messages=messages, budget=1000)
    assert [(m.role, m.content) for m in built.messages] == [
        ("user", 'look\n{"image_url": "x", "type": "image_url"}'),
        ("assistant", ""),
    ]


def test_a_memory_without_a_score_is_kept_and_no_threshold_keeps_every_one():
    memories = [{"value": {"text": "unscored"}}, {"value": {"content": "low"}, "score": 0.01}, {"value": {"n": 1}, "score": 0.9}]
    kept = build_context(messages=[], budget=100, memories=memories)
    assert kept.memories_used == 2 and kept.memories_below_threshold == 1
    assert kept.messages[0].content == "Relevant long-term memory:\n- unscored\n- {\"n\": 1}"
    everything = build_context(messages=[], budget=100, memories=memories, min_score=None)
    assert everything.memories_used == 3 and "- low" in everything.messages[0].content


def test_the_token_counter_can_be_replaced():
    def words(text):
        return len(text.split())

    messages = [msg("user", "one two three"), msg("user", "four five")]
    needed = (3 + MESSAGE_OVERHEAD) + (2 + MESSAGE_OVERHEAD)
    built = build_context(messages=messages, budget=needed, count_tokens=words)
    assert [m.tokens for m in built.messages] == [3 + MESSAGE_OVERHEAD, 2 + MESSAGE_OVERHEAD] and built.dropped == 0
    tight = build_context(messages=messages, budget=needed - 1, count_tokens=words)
    assert [m.content for m in tight.messages] == ["four five"] and tight.dropped == 1
