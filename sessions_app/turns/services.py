"""Turns: a thread's business-layer dialogue, question by question (docs/turns.md).

The rules are docs/turns.md, rules T1-T6: a multi-turn context manager, with its
state in the database instead of process memory so that every server process
shares it:

- begin: a blank question is ignored (nothing written); otherwise it opens the
  thread's one pending turn, replacing a pending turn left over.
- append: streamed chunks of the answer, each numbered by the server under the
  pending turn's row lock, so concurrent appends never collide and keep the
  order in which they took the lock.
- finish: the chunks joined and trimmed are the answer; a blank answer drops the
  turn; the answer is cut to MEMORYADMIN_TURN_MAX_ANSWER_CHARS; the thread keeps
  its last MEMORYADMIN_TURN_WINDOW finished turns, oldest dropped first.
- discard: the pending turn is dropped.
- restart: the last finished turn is reopened as pending with its question (after
  human feedback, a new answer replaces it).

Every write that changes the pending turn notifies the thread's channel in its own
transaction (sessions_app/turns/listener.py), so open streams wake at its commit.

Writes are the owner's only (not another member's, nor an operator's, nor an
admin's: memoryadmin.policy); reads follow the thread's read rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.errors import Conflict, InvalidInput, NotFound
from memoryadmin_client.context import DEFAULT_MIN_SCORE, build_context
from store_app.namespaces import namespace_from_path, namespace_validate
from store_app.selectors import store_item_search, store_search_validate

from sessions_app.threads.models import Thread
from sessions_app.turns.listener import turn_changed
from sessions_app.turns.models import Turn, TurnChunk, turns_delete
from sessions_app.threads.selectors import thread_agent_state, thread_get_for_read, thread_id_validate

QUESTION_MAX_CHARS = 100_000
CHUNK_MAX_CHARS = 100_000
# A pending turn's answer is bounded too: a runaway stream cannot grow a row forever.
PENDING_MAX_CHUNKS = 100_000
ELLIPSIS = "…"


def turn_window() -> int:
    """Finished turns a thread keeps (settings.MEMORYADMIN_TURN_WINDOW, at least 1)."""
    return settings.MEMORYADMIN_TURN_WINDOW


def turn_max_answer_chars() -> int:
    """The longest answer kept, in characters (settings.MEMORYADMIN_TURN_MAX_ANSWER_CHARS)."""
    return settings.MEMORYADMIN_TURN_MAX_ANSWER_CHARS


def _text(value: Any, *, field_name: str, max_chars: int) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{field_name} must be a string.", fields={field_name: ["must be a string."]})
    if len(value) > max_chars:
        raise InvalidInput(
            f"{field_name} is longer than {max_chars} characters.",
            fields={field_name: [f"at most {max_chars} characters."]},
        )
    if "\x00" in value:
        raise InvalidInput(f"{field_name} cannot contain NUL.", fields={field_name: ["cannot contain NUL."]})
    return value


def cut_answer(answer: str, max_chars: int) -> str:
    """The answer cut to max_chars, the last kept character an ellipsis when cut (docs/turns.md, rule T3)."""
    if len(answer) <= max_chars:
        return answer
    return answer[: max_chars - 1] + ELLIPSIS


# --- ownership ---------------------------------------------------------------


def _thread_for_write(*, actor, thread_id: str, action: str) -> Thread:
    """The thread row, locked for this transaction, if the actor may write turns to it.

    The lock serialises begin/finish/discard/restart of one thread across processes.
    """
    thread_id_validate(thread_id)
    thread = Thread.objects.select_for_update().filter(thread_id=thread_id).first()
    if thread is None:
        raise NotFound(f"Thread {thread_id!r} does not exist.")
    _ensure_may_write(actor, thread, action)
    return thread


def _pending(thread: Thread, *, lock: bool = False) -> Turn | None:
    qs = Turn.objects.filter(thread=thread, status=Turn.Status.PENDING)
    if lock:
        qs = qs.select_for_update()
    return qs.first()


# --- services ----------------------------------------------------------------


@transaction.atomic
def turn_begin(*, actor, thread_id: str, question: Any) -> Turn | None:
    """Open the thread's pending turn with this question; None when the question is blank.

    docs/turns.md, rule T1: a blank question is ignored, and a new question replaces a
    pending turn that was never finished (its chunks go with it).
    """
    question = _text(question, field_name="question", max_chars=QUESTION_MAX_CHARS)
    if not question.strip():
        # Ownership is still checked: a blank question to someone else's thread is a 403, not a 200.
        thread_id_validate(thread_id)
        thread = Thread.objects.filter(thread_id=thread_id).first()
        if thread is None:
            raise NotFound(f"Thread {thread_id!r} does not exist.")
        _ensure_may_write(actor, thread, "turn.begin")
        return None
    thread = _thread_for_write(actor=actor, thread_id=thread_id, action="turn.begin")
    turns_delete(Turn.objects.filter(thread=thread, status=Turn.Status.PENDING))
    last = Turn.objects.filter(thread=thread).aggregate(m=Max("seq"))["m"] or 0
    turn = Turn.objects.create(thread=thread, seq=last + 1, question=question.strip())
    turn_changed(thread.pk)
    return turn


def _ensure_may_write(actor, thread: Thread, action: str) -> None:
    """Turns are written by the thread's owner only (memoryadmin.policy)."""
    policy.ensure_may_write(actor, owner_id=thread.owner_id, target=f"thread:{thread.thread_id}", action=action)


@dataclass(frozen=True)
class ChunkResult:
    index: int | None
    ignored: bool = False


@transaction.atomic
def turn_append_chunk(*, actor, thread_id: str, text: Any) -> ChunkResult:
    """Append a streamed chunk to the pending turn; 409 when there is none.

    The index is given here, under the pending turn's row lock (SELECT … FOR
    UPDATE): two processes appending at once wait for each other, so indexes are
    dense and follow the order of arrival. The thread row is not locked, so a
    stream does not hold up other writes to the thread. An empty chunk is ignored;
    a whitespace chunk is kept (streamed tokens are often a lone space, which a
    blank check would drop: docs/turns.md, rule T2).
    """
    text = _text(text, field_name="text", max_chars=CHUNK_MAX_CHARS)
    thread_id_validate(thread_id)
    thread = Thread.objects.filter(thread_id=thread_id).first()
    if thread is None:
        raise NotFound(f"Thread {thread_id!r} does not exist.")
    _ensure_may_write(actor, thread, "turn.append")
    turn = _pending(thread, lock=True)
    if turn is None:
        raise Conflict("This thread has no pending turn: begin one first.", code="no_pending_turn")
    if text == "":
        return ChunkResult(index=None, ignored=True)
    last = turn.chunks.aggregate(m=Max("index"))["m"]
    index = 0 if last is None else last + 1
    if index >= PENDING_MAX_CHUNKS:
        raise Conflict(f"The pending turn already holds {PENDING_MAX_CHUNKS} chunks.", code="too_many_chunks")
    TurnChunk.objects.create(turn=turn, index=index, text=text)
    # In this transaction: the thread's open streams wake when the chunk is committed.
    turn_changed(thread.pk)
    return ChunkResult(index=index)


@dataclass(frozen=True)
class FinishResult:
    finished: bool
    dropped: bool
    truncated: bool = False
    evicted: int = 0
    turn: Turn | None = None


@transaction.atomic
def turn_finish(*, actor, thread_id: str) -> FinishResult:
    """Close the pending turn: it joins the finished turns, or is dropped when its answer is blank.

    docs/turns.md, rule T3: the answer is the chunks joined and trimmed, cut to the
    configured maximum; the window keeps the last N finished turns (oldest evicted first).
    409 when no turn is pending.
    """
    thread = _thread_for_write(actor=actor, thread_id=thread_id, action="turn.finish")
    turn = _pending(thread, lock=True)
    if turn is None:
        raise Conflict("This thread has no pending turn to finish.", code="no_pending_turn")
    answer = "".join(turn.chunks.order_by("index").values_list("text", flat=True)).strip()
    if not answer:
        turns_delete(Turn.objects.filter(thread=thread, pk=turn.pk))
        turn_changed(thread.pk)
        return FinishResult(finished=False, dropped=True)
    max_chars = turn_max_answer_chars()
    cut = cut_answer(answer, max_chars)
    turn.answer = cut
    turn.status = Turn.Status.FINISHED
    turn.finished_at = timezone.now()
    turn.save_in_thread(["answer", "status", "finished_at"])
    # The answer now holds the text; the chunks were only its transport.
    TurnChunk.objects.filter(turn=turn).delete()
    keep = list(
        Turn.objects.filter(thread=thread, status=Turn.Status.FINISHED)
        .order_by("-seq").values_list("pk", flat=True)[: turn_window()]
    )
    evicted = turns_delete(Turn.objects.filter(thread=thread, status=Turn.Status.FINISHED).exclude(pk__in=keep))
    turn_changed(thread.pk)
    return FinishResult(finished=True, dropped=False, truncated=cut != answer, evicted=evicted, turn=turn)


@transaction.atomic
def turn_discard(*, actor, thread_id: str) -> bool:
    """Drop the pending turn (a run stopped); False when there was none, a no-op (docs/turns.md, rule T4)."""
    thread = _thread_for_write(actor=actor, thread_id=thread_id, action="turn.discard")
    discarded = turns_delete(Turn.objects.filter(thread=thread, status=Turn.Status.PENDING)) > 0
    if discarded:
        turn_changed(thread.pk)
    return discarded


@transaction.atomic
def turn_restart(*, actor, thread_id: str) -> Turn | None:
    """Reopen the last finished turn as pending, with its question and no answer.

    docs/turns.md, rule T5 (after human feedback): the last saved turn is removed from
    the finished ones and its question asked again; a pending turn left over is
    replaced. None (nothing written) when there is no finished turn.
    """
    thread = _thread_for_write(actor=actor, thread_id=thread_id, action="turn.restart")
    last = Turn.objects.filter(thread=thread, status=Turn.Status.FINISHED).order_by("-seq").first()
    if last is None:
        return None
    turns_delete(Turn.objects.filter(thread=thread, status=Turn.Status.PENDING))
    last.status = Turn.Status.PENDING
    last.answer = ""
    last.finished_at = None
    last.save_in_thread(["status", "answer", "finished_at"])
    turn_changed(thread.pk)
    return last


# --- selectors ---------------------------------------------------------------


@dataclass
class TurnContext:
    thread: Thread
    turns: list[dict[str, str]]
    pending: dict[str, Any] | None
    rendered: str = field(default="")

    def as_dict(self) -> dict[str, Any]:
        return {"thread_id": self.thread.thread_id, "turns": self.turns, "pending": self.pending, "rendered": self.rendered}


def render_turns(turns: list[dict[str, str]]) -> str:
    """The finished turns as a prompt: "User: …\\nAssistant: …" per turn, one turn after another."""
    return "\n".join(f"User: {turn['question']}\nAssistant: {turn['answer']}" for turn in turns)


def turn_context(*, actor, thread_id: str, thread: Thread | None = None) -> TurnContext:
    """The thread's finished turns (oldest first), its pending turn and the rendered prompt.

    Three queries whatever the number of turns or chunks: the thread, the turns,
    and the pending turn's chunks.
    """
    if thread is None:
        thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    rows = list(
        Turn.objects.filter(thread=thread).order_by("seq")
        .values("pk", "status", "seq", "question", "answer", "created_at")
    )
    finished = [{"question": r["question"], "answer": r["answer"]} for r in rows if r["status"] == Turn.Status.FINISHED]
    pending_row = next((r for r in rows if r["status"] == Turn.Status.PENDING), None)
    pending = None
    if pending_row is not None:
        chunks = list(TurnChunk.objects.filter(turn_id=pending_row["pk"]).order_by("index").values_list("index", "text"))
        pending = {
            "id": pending_row["pk"],
            "question": pending_row["question"],
            "answer": "".join(text for _, text in chunks),
            "chunks": len(chunks),
            # The live view streams from the chunk after this one: what the panel shows is not sent twice.
            "last_index": chunks[-1][0] if chunks else -1,
            "created_at": pending_row["created_at"],
        }
    return TurnContext(thread=thread, turns=finished, pending=pending, rendered=render_turns(finished))


# --- context preview ---------------------------------------------------------

PREVIEW_BUDGET_MAX = 1_000_000
PREVIEW_MEMORY_LIMIT = 5


def _preview_budget(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= PREVIEW_BUDGET_MAX:
        raise InvalidInput(
            f"budget must be an integer between 1 and {PREVIEW_BUDGET_MAX}.",
            fields={"budget": [f"must be an integer between 1 and {PREVIEW_BUDGET_MAX}."]},
        )
    return value


def _preview_min_score(value: Any) -> float:
    if value is None:
        return DEFAULT_MIN_SCORE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidInput("min_score must be a number between 0 and 1.", fields={"min_score": ["must be a number between 0 and 1."]})
    return float(value)


def context_preview(
    *, actor, thread_id: str, budget: Any, namespace: Any = None, query: Any = None, min_score: Any = None
) -> dict[str, Any]:
    """Exactly the messages a model would receive for this thread, with token counts (docs/turns.md).

    The memory comes from the store search the actor may make (best `score`
    first, PREVIEW_MEMORY_LIMIT items), the history from the thread's active
    context; `build_context` (memoryadmin_client.context) decides the rest,
    the same function agents call. Every parameter is checked before any query,
    as JSON types (the page turns its form's text into them): a budget that is
    not an integer, a query that is not a string, or a query without a namespace
    to search is a 400 naming the field.
    """
    budget = _preview_budget(budget)
    min_score = _preview_min_score(min_score)
    if query is not None and not isinstance(query, str):
        raise InvalidInput("query must be a string.", fields={"query": ["must be a string."]})
    search = None
    if isinstance(namespace, str):
        namespace = namespace_from_path(namespace, field="namespace")
    elif namespace is not None:
        namespace = namespace_validate(namespace, field="namespace")
    if namespace:
        search = store_search_validate(namespace_prefix=namespace, query=query or None, limit=PREVIEW_MEMORY_LIMIT)
    elif query:
        raise InvalidInput("query needs a namespace to search.", fields={"namespace": ["required with a query."]})
    state = thread_agent_state(actor=actor, thread_id=thread_id)
    memories = []
    if search is not None:
        memories = [
            {"namespace": list(item.namespace), "key": item.key, "value": item.value, "score": item.score}
            for item in store_item_search(actor=actor, request=search, matching_only=True)
        ]
    built = build_context(messages=state.context, budget=budget, memories=memories, min_score=min_score)
    body = built.as_dict()
    body.update(
        thread_id=state.thread.thread_id,
        namespace=list(namespace) if namespace else None,
        query=query or None,
        min_score=min_score,
        memories=memories,
    )
    return body
