"""LangGraph's `update_state`, made by the server: `POST /threads/{id}/state` (docs/checkpoints.md).

As `graph.update_state(config, values, as_node)` does, the update is a new checkpoint
after the latest one (or after a given one: a fork), in the same namespace, made as if
`as_node` had just run and written `values`:

- the pending tasks of the step are dropped (their triggers and `Send` packets cleared);
- each key of `values` is written through its channel's reducer where the data tells
  it: a channel of LangChain messages merges by `add_messages` (same id replaces, new
  appends, RemoveMessage deletes); any other key is replaced;
- `as_node`'s edges fire. memoryadmin does not run the graph, so it takes them from the
  thread itself: the trigger channels `as_node`'s latest run in this namespace wrote.
  A node that has not run here, or whose run sent `Send` packets (computed by graph
  code from the state), is refused with a 400 naming `as_node`: the graph's own
  `update_state` (with `MemoryAdminSaver`) can do that update;
- `as_node` left out is inferred as LangGraph infers it: the node that saw the newest
  channel version (a tie is ambiguous, a 400).

The checkpoint is LangGraph's: a time-ordered uuid6 id after its parent's, `ts`, the
step one more (`metadata.source` "update"), versions moved past the newest one, and
`versions_seen` as LangGraph leaves it; it is written through `checkpoint_put`, so the
thread's owner alone may do it.
"""

from __future__ import annotations

import copy
import random
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from memoryadmin import policy
from memoryadmin.audit import audit_record
from memoryadmin.errors import InvalidInput
from memoryadmin.json import loads as json_loads

from sessions_app.checkpoints import services as svc
from sessions_app.checkpoints.langgraph import is_langgraph_checkpoint
from sessions_app.checkpoints.models import Checkpoint
from sessions_app.checkpoints.reducers import add_messages, is_message_channel
from sessions_app.checkpoints.selectors import checkpoint_get_in, checkpoint_id_validate
from sessions_app.checkpoints.tasks import (
    BRANCH_PREFIX,
    NOT_NODES,
    START,
    graph_tasks,
    version_key,
)
from sessions_app.checkpoints.wire import TASKS, is_internal_channel
from sessions_app.threads.selectors import thread_get_for_read

# as_node values that make LangGraph do something else than a node's update
# (input, copy, clearing the tasks): not made by the server.
SPECIAL_AS_NODES = frozenset({"__input__", "__copy__", "__end__"})
SNAPSHOT_BUMPS = "__snapshot_bumps__"
# 100-ns intervals between the Gregorian epoch of uuid timestamps and the Unix epoch.
UUID_EPOCH = 0x01B21DD213814000


def _refuse(field: str, message: str) -> InvalidInput:
    return InvalidInput(f"{field} {message}", fields={field: [message]})


def uuid6_after(previous: str | None, *, clock_seq: int) -> str:
    """A uuid6 (time-ordered, as LangGraph's checkpoint ids are) later than `previous`.

    The parent was made by the client's clock; the id must still sort after it,
    so the timestamp is at least one past the parent's.
    """
    stamp = time.time_ns() // 100 + UUID_EPOCH
    try:
        before = uuid.UUID(previous) if previous else None
    except ValueError:
        before = None
    if before is not None and before.version == 6:
        stamp = max(stamp, (((before.int >> 80) << 12) | ((before.int >> 64) & 0xFFF)) + 1)
    value = ((stamp >> 12) & 0xFFFF_FFFF_FFFF) << 80
    value |= 0x6 << 76 | (stamp & 0xFFF) << 64 | 0b10 << 62 | (clock_seq & 0x3FFF) << 48 | random.getrandbits(48)
    return str(uuid.UUID(int=value))


def _next_version(versions: dict[str, Any]) -> Any:
    """One past the newest channel version, in the format the thread's saver uses (ints, or padded text)."""
    current = max(versions.values(), key=version_key) if versions else None
    if isinstance(current, int) and not isinstance(current, bool):
        return current + 1
    counter = int(version_key(current)[0]) if current is not None else 0
    return f"{counter + 1:032}.{random.random():016}"


def _infer_as_node(versions_seen: dict[str, Any]) -> str | None:
    """LangGraph's `_infer_as_node`: the node that saw the newest version; None when it is a tie."""
    seen = {node: versions for node, versions in versions_seen.items() if node not in NOT_NODES | {SNAPSHOT_BUMPS}}
    last = sorted(
        (version_key(version), node) for node, versions in seen.items() if isinstance(versions, dict) for version in versions.values()
    )
    if not last:
        return START
    if len(last) == 1 or last[-1][0] != last[-2][0]:
        return last[-1][1]
    return None


def _known_nodes(base: Checkpoint) -> set[str]:
    seen = base.checkpoint.get("versions_seen") or {}
    tasks = graph_tasks(base.checkpoint, checkpoint_ns=base.checkpoint_ns, metadata=base.metadata)
    return {node for node in seen if node not in NOT_NODES | {SNAPSHOT_BUMPS}} | {task.name for task in tasks} | {START}


def _triggers_of(base: Checkpoint, as_node: str) -> list[str]:
    """The trigger channels `as_node` wrote when it last ran here: what its edges fire."""
    last_id = (
        Checkpoint.objects.filter(thread=base.thread, checkpoint_ns=base.checkpoint_ns, node_id=as_node, pk__lte=base.pk)
        .order_by("-id")
        .values_list("checkpoint_id", flat=True)
        .first()
    )
    if last_id is None:
        raise _refuse(
            "as_node",
            f"{as_node!r} has not run in this thread, so what it triggers next is not known to memoryadmin (it runs no "
            "graph); make the update with the graph's update_state (MemoryAdminSaver).",
        )
    run = checkpoint_get_in(thread=base.thread, checkpoint_id=last_id, checkpoint_ns=base.checkpoint_ns).checkpoint
    values = run.get("channel_values") if isinstance(run, dict) else None
    values = values if isinstance(values, dict) else {}
    if values.get(TASKS):
        raise _refuse(
            "as_node",
            f"{as_node!r} routes with Send packets, which only the graph's code can make again; make the update with "
            "the graph's update_state (MemoryAdminSaver).",
        )
    return sorted(channel for channel in values if channel.startswith(BRANCH_PREFIX))


def _as_node(value: Any, base: Checkpoint) -> str:
    if value is None:
        inferred = _infer_as_node(base.checkpoint.get("versions_seen") or {})
        if inferred is None:
            raise _refuse("as_node", "is needed: two nodes updated the state last (an ambiguous update, as LangGraph says).")
        return inferred
    if not isinstance(value, str) or not value or len(value) > svc.NODE_ID_MAX:
        raise _refuse("as_node", f"must be a node name (a string of at most {svc.NODE_ID_MAX} characters).")
    if value in SPECIAL_AS_NODES:
        raise _refuse("as_node", f"{value!r} is not supported by memoryadmin.")
    if value not in _known_nodes(base):
        raise _refuse("as_node", f"node {value!r} does not exist in this thread's graph (not run, not due).")
    return value


def _write_values(channel_values: dict[str, Any], values: dict[str, Any]) -> list[str]:
    written = []
    for key, value in values.items():
        where = f"values.{key}"
        if not isinstance(key, str) or not key or is_internal_channel(key):
            raise _refuse(where, "is not a state key (LangGraph's own channels cannot be written).")
        svc._json_value(value, where)  # what PostgreSQL cannot store is refused under its own name
        if is_message_channel(key, channel_values.get(key)):
            channel_values[key] = add_messages(channel_values.get(key) or [], value, where=where)
        else:
            channel_values[key] = value
        written.append(key)
    return written


@transaction.atomic
def thread_update_state(
    *,
    actor,
    thread_id: str,
    values: Any,
    as_node: Any = None,
    checkpoint_id: str | None = None,
    checkpoint_ns: str = "",
    action: str = "checkpoint.put",
) -> dict[str, Any]:
    """`POST /threads/{id}/state`: a new checkpoint made as `as_node` with `values` (module docstring).

    Refused with a 400 naming the field and nothing written: values not an
    object, a key that is not a state key, a message that is not one, an
    unknown or special `as_node`, a node whose edges are not known here; a
    thread without a checkpoint (or an unknown checkpoint id) is a 404.
    """
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise _refuse("values", "must be an object of state keys.")
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    base = checkpoint_get_in(thread=thread, checkpoint_id=checkpoint_id, checkpoint_ns=checkpoint_ns)
    if not is_langgraph_checkpoint(base.checkpoint) or not isinstance(base.checkpoint.get("channel_values"), dict):
        raise _refuse("checkpoint", "is not a LangGraph checkpoint, which update_state needs.")
    node = _as_node(as_node, base)
    triggers = _triggers_of(base, node)

    body = copy.deepcopy(base.checkpoint)
    channel_values, versions = body["channel_values"], body["channel_versions"]
    version = _next_version(versions)
    written = _write_values(channel_values, values)
    # The step's pending tasks are dropped: their triggers and packets are cleared, as a new step clears them.
    for channel in [name for name in channel_values if name in (START, TASKS) or name.startswith(BRANCH_PREFIX)]:
        del channel_values[channel]
        versions[channel] = version
    for channel in triggers:
        channel_values[channel] = None
    for channel in [*written, *triggers]:
        versions[channel] = version
    body["versions_seen"].setdefault(node, {})
    step = base.metadata.get("step") if isinstance(base.metadata, dict) else None
    step = step if isinstance(step, int) and not isinstance(step, bool) else -1
    new_id = uuid6_after(base.checkpoint_id, clock_seq=step + 1)
    body.update(id=new_id, ts=datetime.now(UTC).isoformat(), updated_channels=None)
    parents = base.metadata.get("parents") if isinstance(base.metadata, dict) else None
    metadata = {"source": "update", "step": step + 1, "parents": parents if isinstance(parents, dict) else {}}
    data = svc.checkpoint_input(
        checkpoint=body, metadata=metadata, checkpoint_ns=base.checkpoint_ns, parent_checkpoint_id=base.checkpoint_id, node_id=node
    )
    result = svc.checkpoint_put(actor=actor, thread_id=thread.thread_id, data=data, checkpoint_id=new_id, action=action)
    return {
        "checkpoint": {
            "thread_id": result.thread_id,
            "checkpoint_ns": result.checkpoint_ns,
            "checkpoint_id": result.checkpoint_id,
            "checkpoint_map": None,
        }
    }


def fork_values(text: Any) -> dict[str, Any]:
    """The dashboard's edited values: JSON text of an object (empty: no value changed), else a 400 naming `values`."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return {}
    if not isinstance(text, str):
        raise _refuse("values", "must be JSON text.")
    try:
        values = json_loads(text, field="values")
    except ValueError as exc:
        raise _refuse("values", f"is not valid JSON ({str(exc)[:200]}).") from None
    if not isinstance(values, dict):
        raise _refuse("values", "must be a JSON object of state keys, such as {\"note\": \"checked\"}.")
    return values


@transaction.atomic
def checkpoint_fork(
    *, actor, thread_id: str, checkpoint_id: str, checkpoint_ns: str = "", values: Any = None, as_node: Any = None, request=None
) -> dict[str, Any]:
    """Time travel from the dashboard: a new checkpoint whose parent is `checkpoint_id` (a branch).

    The same update as the API's `update_state` (`thread_update_state`: values through
    their channels' reducers, `as_node` optional and inferred as LangGraph infers it),
    under its own rule, `checkpoint.fork`: the thread's owner, or an admin, whose fork
    is audited with what it wrote (rule A4). `values` is the JSON text of the form;
    bad JSON or a bad key is a 400 naming the field, and nothing is written.
    """
    thread = thread_get_for_read(actor=actor, thread_id=thread_id)
    policy.ensure_may_write(actor, owner_id=thread.owner_id, target=f"thread:{thread.thread_id}", action="checkpoint.fork")
    checkpoint_id = checkpoint_id_validate(checkpoint_id, "checkpoint")
    parsed = fork_values(values)
    if isinstance(as_node, str):
        as_node = as_node.strip() or None
    result = thread_update_state(
        actor=actor,
        thread_id=thread.thread_id,
        values=parsed,
        as_node=as_node,
        checkpoint_id=checkpoint_id,
        checkpoint_ns=checkpoint_ns,
        action="checkpoint.fork",
    )
    if not policy.owns(actor, thread.owner_id):
        audit_record(
            actor=actor,
            action="checkpoint.fork",
            target=f"thread:{thread.thread_id}",
            detail={
                "owner": thread.owner.get_username(),
                "checkpoint_ns": checkpoint_ns,
                "parent_checkpoint_id": checkpoint_id,
                "checkpoint_id": result["checkpoint"]["checkpoint_id"],
                "as_node": as_node,
                "keys": sorted(parsed)[:50],
            },
            request=request,
        )
    return result


__all__ = ["checkpoint_fork", "fork_values", "thread_update_state", "uuid6_after"]
