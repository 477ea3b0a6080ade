"""LangGraph's semantics over stored checkpoints: graph position, thread state and status,
history, search, and the thread shapes the LangGraph SDK reads (docs/checkpoints.md)."""

from __future__ import annotations


import uuid
from typing import Any

from django.db.models import Case, Count, Exists, IntegerField, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce

from memoryadmin import policy
from memoryadmin.errors import InvalidInput, NotFound

from ..threads.models import Thread
from .models import Checkpoint
from ..threads.selectors import thread_get_for_read
from sessions_app.checkpoints.search import ThreadFilter, thread_search_queryset, threads_with_checkpoints
from sessions_app.checkpoints.conversation import checkpoints_hydrate
from sessions_app.checkpoints.selectors import attach_writes, checkpoint_get_in, checkpoint_list, writes_of
from sessions_app.checkpoints.reducers import add_messages, is_message_channel
from sessions_app.checkpoints.tasks import (
    Task, entry_output, graph_tasks, interrupt_items, is_functional, next_node_names, task_result,
)
from sessions_app.checkpoints.tasks import attach_writes as attach_task_writes
from sessions_app.checkpoints.wire import (
    ERROR, INTERRUPT, NULL_TASK_ID, is_internal_channel, plain, readable, state_channels, state_values,
)


# --- graph position: which node wrote a checkpoint, which runs next ------------------------------


def next_nodes(checkpoint: Any) -> list[str]:
    """Nodes a LangGraph checkpoint will run next (each once, sorted): its tasks' nodes.

    As LangGraph prepares them (`tasks.graph_tasks`): a node whose trigger channel
    (`branch:to:<node>`, `__start__` for the entry) holds a value newer than the
    version in `versions_seen[node]`, and the node of every `Send` packet waiting
    in `__pregel_tasks` (a fan-out, the prebuilt ReAct agent's tool calls).
    """
    return next_node_names(checkpoint)


def nodes_run(versions_seen: Any, parent_versions_seen: Any) -> list[str]:
    """Nodes that ran between the parent and this checkpoint: their `versions_seen` changed."""
    if not isinstance(versions_seen, dict):
        return []
    before = parent_versions_seen if isinstance(parent_versions_seen, dict) else {}
    # versions_seen also tracks interrupts already raised, under a key that is not a node.
    return sorted(node for node, seen in versions_seen.items() if node != INTERRUPT and before.get(node) != seen)


def is_langgraph_checkpoint(checkpoint: Any) -> bool:
    return (
        isinstance(checkpoint, dict)
        and isinstance(checkpoint.get("channel_versions"), dict)
        and isinstance(checkpoint.get("versions_seen"), dict)
    )

# --- LangGraph's thread shapes -------------------------------------------------------------------


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> dict[str, Any] | None:
    if not checkpoint_id:
        return None
    return {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id, "checkpoint_map": None}


def interrupts_of(writes) -> list[dict[str, Any]]:
    """Interrupts raised against a checkpoint, as `{"value", "id"}` (LangGraph's Interrupt shape)."""
    return [item for write in writes if write.channel == INTERRUPT for item in interrupt_items(write)]


def status_of(*, next_node_id: str, has_error: bool, has_interrupt: bool) -> str:
    """LangGraph's thread status, read from the latest checkpoint.

    memoryadmin runs no graph, so it cannot say "busy": an error write against
    the latest step means "error"; a pending interrupt, or tasks still to run
    (the graph stopped before or after a node it interrupts at, or before a
    human answers), mean "interrupted"; anything else "idle".
    """
    if has_error:
        return "error"
    if has_interrupt or next_node_id:
        return "interrupted"
    return "idle"


def _task_error(value: Any) -> str | None:
    if value is None:
        return None
    # LangGraph stores an error as its repr; a value of another kind is shown readable.
    return value if isinstance(value, str) else str(readable(value))


def _task_shape(task: Task, *, interrupts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": task.id,
        "name": task.name,
        "path": task.path,
        "error": _task_error(task.error),
        "interrupts": interrupts,
        "checkpoint": None,
        "state": None,
        "result": task_result(task),
    }


def _step_values(checkpoint: Checkpoint, tasks: list[Task], *, live: bool) -> dict[str, Any]:
    """The state values LangGraph's snapshot shows: the checkpoint's, with the step's writes that count.

    Writes of no task (`Command(update=...)` on a resume) always count, and, in
    the live view, those of tasks that finished. They are folded in where the
    channel's reducer is known from the data, `add_messages` on a channel of
    LangChain messages; other writes stay in their task's `result`.
    """
    channels = dict(state_channels(checkpoint.checkpoint))
    finished = {task.id for task in tasks if task.finished} if live else set()
    counter = iter(range(1_000_000))
    for write in checkpoint.pending:
        if write.task_id != NULL_TASK_ID and write.task_id not in finished:
            continue
        if is_internal_channel(write.channel) or not is_message_channel(write.channel, channels.get(write.channel)):
            continue
        # Stable ids for messages written without one, so every read shows the same ids.
        def new_id(write=write) -> str:
            return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{checkpoint.checkpoint_id}/{write.task_id}/{write.idx}/{next(counter)}"))
        try:
            channels[write.channel] = add_messages(channels.get(write.channel) or [], write.value, where=write.channel, new_id=new_id)
        except InvalidInput:
            continue  # not messages after all: the write stays in its task's result
    return {name: plain(value) for name, value in channels.items()}


def _saver_state(checkpoint: Checkpoint) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """next, tasks and interrupts of a checkpoint that is not LangGraph's: from node_id / next_node_id."""
    writes = checkpoint.pending
    interrupts = interrupts_of(writes)
    errors = [write for write in writes if write.channel == ERROR]
    nexts = [node for node in checkpoint.next_node_id.split(",") if node]
    task_ids = sorted({write.task_id for write in writes if write.channel in (INTERRUPT, ERROR)})
    tasks = []
    for node in nexts:
        # Such a saver names its next node but no task: one is known only when a single task is due.
        single = len(nexts) == 1
        tasks.append(
            {
                "id": task_ids[0] if single and len(task_ids) == 1 else "",
                "name": node,
                "path": [],
                "error": _task_error(errors[0].value) if single and errors else None,
                "interrupts": interrupts if single else [],
                "checkpoint": None,
                "state": None,
                "result": None,
            }
        )
    return nexts, tasks, interrupts


def graph_values(body: Any) -> Any:
    """A thread's values as LangGraph's thread API shows them: the latest checkpoint's state
    keys, or the functional API's entrypoint output."""
    if is_langgraph_checkpoint(body) and is_functional(body):
        return entry_output(body, [], live=False)
    return state_values(body)


def checkpoint_state(checkpoint: Checkpoint, *, thread: Thread, live: bool = False) -> dict[str, Any]:
    """A checkpoint as LangGraph's ThreadState, as `graph.get_state` reads it.

    `live` is LangGraph's reading of the latest state (asked for without a
    checkpoint id): `next` lists only the tasks still to run and `interrupts`
    only those still waiting for an answer. Otherwise (a checkpoint by id, the
    history) it is the record of the step: every task, every interrupt raised.
    A task that finished carries its `result`, a failed one its `error`.
    `created_at` is the checkpoint's own `ts`.
    """
    body = checkpoint.checkpoint
    if is_langgraph_checkpoint(body):
        tasks = attach_task_writes(
            graph_tasks(body, checkpoint_ns=checkpoint.checkpoint_ns, metadata=checkpoint.metadata, writes=checkpoint.pending),
            checkpoint.pending,
        )
        shown = [
            _task_shape(task, interrupts=[] if live and task.finished else task.interrupts) for task in tasks
        ]
        nexts = [task.name for task in tasks if not (live and task.finished)]
        interrupts = [item for task in shown for item in task["interrupts"]]
        if is_functional(body, checkpoint.pending):
            values = entry_output(body, tasks, live=live)
        else:
            values = _step_values(checkpoint, tasks, live=live)
    else:
        nexts, shown, interrupts = _saver_state(checkpoint)
        values = state_values(body)
    ts = body.get("ts") if isinstance(body, dict) else None
    return {
        "values": values,
        "next": nexts,
        "tasks": shown,
        "checkpoint": _config(thread.thread_id, checkpoint.checkpoint_ns, checkpoint.checkpoint_id),
        "metadata": checkpoint.metadata,
        "created_at": ts if isinstance(ts, str) and ts else checkpoint.created_at.isoformat(),
        "parent_checkpoint": _config(thread.thread_id, checkpoint.checkpoint_ns, checkpoint.parent_checkpoint_id),
        "interrupts": interrupts,
    }


def pending_interrupts_by_task(checkpoint: Checkpoint) -> dict[str, list[dict[str, Any]]]:
    """LangGraph's Thread `interrupts`: per task id, the interrupts still waiting for an answer."""
    if is_langgraph_checkpoint(checkpoint.checkpoint):
        tasks = attach_task_writes(
            graph_tasks(
                checkpoint.checkpoint, checkpoint_ns=checkpoint.checkpoint_ns, metadata=checkpoint.metadata,
                writes=checkpoint.pending,
            ),
            checkpoint.pending,
        )
        return {task.id: task.interrupts for task in tasks if task.interrupts and not task.finished}
    by_task: dict[str, list[dict[str, Any]]] = {}
    for write in checkpoint.pending:
        if write.channel == INTERRUPT:
            by_task.setdefault(write.task_id, []).extend(interrupt_items(write))
    return by_task


def _empty_state(thread: Thread) -> dict[str, Any]:
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": {"thread_id": thread.thread_id, "checkpoint_ns": "", "checkpoint_id": None, "checkpoint_map": None},
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "interrupts": [],
    }


def thread_state(*, actor, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = "") -> dict[str, Any]:
    """LangGraph's `GET /threads/{id}/state[/{checkpoint_id}]`: an empty state before the first checkpoint.

    Without a checkpoint id it is the live reading of the latest checkpoint, as
    LangGraph's `get_state` gives it; with one, that checkpoint's record.
    """
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    try:
        checkpoint = checkpoint_get_in(thread=thread, checkpoint_id=checkpoint_id, checkpoint_ns=checkpoint_ns)
    except NotFound:
        if checkpoint_id is not None:
            raise
        return _empty_state(thread)
    return checkpoint_state(checkpoint, thread=thread, live=checkpoint_id is None)


def thread_history(
    *, actor, thread_id: str, limit: int = 10, before: str | None = None, metadata: dict | None = None, checkpoint_ns: str = ""
) -> list[dict[str, Any]]:
    """LangGraph's `POST /threads/{id}/history`: states newest first (one namespace, root by default)."""
    page = checkpoint_list(
        actor=actor, thread_id=thread_id, checkpoint_ns=checkpoint_ns, limit=limit, before=before, metadata=metadata
    )
    return [checkpoint_state(checkpoint, thread=page.thread) for checkpoint in page.checkpoints]


def _latest_root(thread_ref) -> QuerySet:
    return Checkpoint.objects.filter(thread=thread_ref, checkpoint_ns="").order_by("-id")


def thread_latest(thread: Thread) -> dict[str, Any]:
    """Checkpoint count, state values and status of a thread in ONE query.

    The latest root-namespace checkpoint comes first (any namespace when the
    thread has no root checkpoint), annotated with the thread's total count and
    whether an error or an interrupt is pending against it.
    """
    count = (
        Checkpoint.objects.filter(thread=thread).order_by().values("thread").annotate(n=Count("id")).values("n")
    )
    writes = writes_of()
    row = (
        Checkpoint.objects.filter(thread=thread)
        .annotate(
            total=Coalesce(Subquery(count[:1]), Value(0)),
            has_error=Exists(writes.filter(channel=ERROR)),
            has_interrupt=Exists(writes.filter(channel=INTERRUPT)),
            root_first=Case(When(checkpoint_ns="", then=Value(0)), default=Value(1), output_field=IntegerField()),
        )
        .order_by("root_first", "-id")
        .first()
    )
    if row is None:
        return {"checkpoints": 0, "values": {}, "status": "idle", "latest": None}
    root = row.checkpoint_ns == ""
    if root:
        checkpoints_hydrate([row])
    return {
        "checkpoints": row.total,
        "values": graph_values(row.checkpoint) if root else {},
        "status": status_of(next_node_id=row.next_node_id, has_error=row.has_error, has_interrupt=row.has_interrupt)
        if root
        else "idle",
        "latest": row,
    }


def thread_search(
    *, actor, filters: ThreadFilter, limit: int = 10, offset: int = 0, sort_by: str = "created_at", sort_order: str = "desc"
) -> list[dict[str, Any]]:
    """LangGraph's `POST /threads/search` over the threads the actor may see (constant queries).

    The threads are selected by `search.thread_search_queryset`, as every listing of
    threads is. The answer holds each thread's values: when it shows other users'
    threads, it is one audit event with the count and the filter (memoryadmin.policy).
    """
    qs = thread_search_queryset(actor=actor, filters=filters, sort=sort_by, order=sort_order, checkpoints=True)
    threads = list(qs[offset : offset + limit])
    audit_filters = {**filters.as_audit(), "limit": limit, "offset": offset, "sort_by": sort_by, "sort_order": sort_order}
    policy.record_bulk_read(
        actor, action="thread.list", kind="threads/search", rows=threads, filters=audit_filters,
        name_of=lambda thread: thread.thread_id,
    )
    return threads_as_langgraph(threads)


def thread_count(*, actor, filters: ThreadFilter) -> int:
    """LangGraph's `POST /threads/count`: how many visible threads `thread_search` would find (no limit)."""
    return thread_search_queryset(actor=actor, filters=filters).count()


def threads_as_langgraph(threads: list[Thread]) -> list[dict[str, Any]]:
    """Threads (annotated by `threads_with_checkpoints`) in LangGraph's Thread shape, four more queries at most
    (the latest checkpoints, their writes, their values by version, the messages they and their
    writes hold by reference), whatever the number of threads."""
    latest_ids = [thread.latest_checkpoint for thread in threads if thread.latest_checkpoint]
    latest = {}
    if latest_ids:
        # By thread as well as by id: each row is looked up in its own thread's partition.
        in_threads = [thread.pk for thread in threads if thread.latest_checkpoint]
        # attach_writes reads them back whole (values by version, messages, markers) with their
        # writes. Not without metadata: a LangGraph checkpoint's tasks read it (for its interrupts).
        rows = attach_writes(list(Checkpoint.objects.filter(thread_id__in=in_threads, pk__in=latest_ids)))
        latest = {row.pk: row for row in rows}
    out = []
    for thread in threads:
        row = latest.get(thread.latest_checkpoint)
        out.append(
            thread_as_langgraph(
                thread,
                values=graph_values(row.checkpoint) if row else {},
                status=thread.lg_status,
                interrupts=pending_interrupts_by_task(row) if row else {},
                checkpoints=thread.checkpoint_count,
            )
        )
    return out


def thread_as_langgraph(thread: Thread, *, values, status, interrupts, checkpoints: int) -> dict[str, Any]:
    """LangGraph's Thread fields, plus memoryadmin's own (owner, agent, counts)."""
    return {
        "thread_id": thread.thread_id,
        "created_at": thread.created_at,
        "updated_at": thread.updated_at,
        "metadata": thread.metadata,
        "status": status,
        "values": values,
        "interrupts": interrupts,
        "owner": thread.owner.get_username(),
        "agent_code": thread.agent_code,
        "title": thread.title,
        "active_blocks": thread.active_count,
        "archived_blocks": thread.archived_count,
        "checkpoints": checkpoints,
    }


def thread_langgraph(*, actor, thread_id: str) -> dict[str, Any]:
    """One thread in LangGraph's Thread shape (for POST/PATCH answers)."""
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    return thread_langgraph_of(thread)


def thread_langgraph_of(thread: Thread) -> dict[str, Any]:
    rows = threads_as_langgraph(
        list(threads_with_checkpoints(Thread.objects.filter(pk=thread.pk).select_related("owner")))
    )
    return rows[0]


def thread_detail(*, actor, thread_id: str) -> dict[str, Any]:
    """The thread as the detail endpoint shows it (LangGraph's thread fields included).

    `values` and `status` are read from the latest checkpoint, in LangGraph's
    shape, with the checkpoint count: one query more than the thread itself.
    """
    from sessions_app.checkpoints.langgraph import thread_latest

    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    latest = thread_latest(thread)
    return {
        "thread_id": thread.thread_id,
        "owner": thread.owner.get_username(),
        "agent_code": thread.agent_code,
        "title": thread.title,
        "created_at": thread.created_at,
        "updated_at": thread.updated_at,
        "metadata": thread.metadata,
        "status": latest["status"],
        "values": latest["values"],
        "active_blocks": thread.active_count,
        "archived_blocks": thread.archived_count,
        "checkpoints": latest["checkpoints"],
    }
