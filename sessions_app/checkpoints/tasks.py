"""LangGraph's tasks of a checkpoint, read from its JSON as LangGraph's own loop prepares them.

The rules are LangGraph's (`langgraph.pregel._algo.prepare_next_tasks` and
`_task_status.read_task_statuses`), applied to the stored checkpoint and its pending
writes without running the graph:

- a PUSH task for each `Send` packet in the `__pregel_tasks` channel, in packet order;
- a PULL task for each node whose trigger channel (`branch:to:<node>`, `__start__`
  for the entry: a StateGraph's `__start__` node, the functional API's entrypoint) holds a
  value newer than the version in `versions_seen[node]`;
- a task's id is LangGraph's: a hash of the checkpoint id, the task's namespace, the
  step, the node and the packet index or trigger channels (xxh3-128 for checkpoints
  of format 2 and later, a uuid5-style sha1 before), so ids match the ones in
  pending writes and interrupts;
- a task has finished when it has an output write; its interrupts are its
  `__interrupt__` writes (pending while it has not finished), its error its
  `__error__` write.

What a checkpoint does not record is out of reach: the order LangGraph gives PULL
tasks is the graph's node order (here: the entry node, then by name); a node
triggered only by a waiting edge (`join:` channels, stored as a blob) and a `Send`
whose argument is not JSON (a blob) are not seen.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass, field
from hashlib import sha1
from typing import Any

from xxhash import xxh3_128_hexdigest

from sessions_app.checkpoints.wire import (
    CONTROL_WRITES,
    ERROR,
    INTERRUPT,
    NS_SEP,
    NULL_TASK_ID,
    PULL,
    PUSH,
    RETURN,
    TASKS,
    is_internal_channel,
    lc_envelope,
    plain,
)

START = "__start__"
END = "__end__"
BRANCH_PREFIX = "branch:to:"
JOIN_PREFIX = "join:"
# Keys of versions_seen that are not nodes: the input and the interrupts already raised.
NOT_NODES = frozenset({"__input__", INTERRUPT})


@dataclass
class Task:
    """One task of a step: which node, its LangGraph id and path, and what its writes say."""

    id: str
    name: str
    path: list[Any]
    output: list[tuple[str, Any]] = field(default_factory=list)
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    error: Any = None

    @property
    def finished(self) -> bool:
        """LangGraph's rule: a task has finished when it recorded an output write."""
        return bool(self.output)


def version_key(version: Any) -> tuple[float, str]:
    """A channel version as something that orders: ints and floats by value, strings by counter then text."""
    if isinstance(version, bool):
        return (float(version), "")
    if isinstance(version, int | float):
        return (float(version), "")
    text = "" if version is None else str(version)
    try:
        return (float(text.split(".")[0]), text)
    except ValueError:
        return (0.0, text)


def _namespace(checkpoint: dict[str, Any]) -> bytes | None:
    raw = checkpoint.get("id")
    if not isinstance(raw, str):
        return None
    try:
        return binascii.unhexlify(raw.replace("-", ""))
    except (binascii.Error, ValueError):
        return None


def task_id(checkpoint: dict[str, Any], *parts: str) -> str:
    """LangGraph's task id (`_xxhash_str`, or `_uuid5_str` for checkpoints before format 2); "" without an id."""
    namespace = _namespace(checkpoint)
    if namespace is None:
        return ""
    data = b"".join(part.encode("utf-8", "surrogatepass") for part in parts)
    form = checkpoint.get("v")
    if isinstance(form, int) and not isinstance(form, bool) and form <= 1:
        digest = sha1(namespace, usedforsecurity=False)
        digest.update(data)
        hexed = digest.hexdigest()
    else:
        hexed = xxh3_128_hexdigest(namespace + data)
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"


def send_node(packet: Any) -> str | None:
    """The node a stored `Send` packet goes to; None when it is not a readable Send."""
    envelope = lc_envelope(packet)
    if envelope is None or envelope[0] != "Send":
        return None
    node = envelope[1].get("node")
    return node if isinstance(node, str) and node else None


def _start_nodes(seen_by_node: dict[str, Any], writes: Any, versions: dict[str, Any]) -> list[str]:
    """The nodes the `__start__` channel itself triggers. A StateGraph's entry is its `__start__`
    node; the functional API's entrypoint is a node of its own name subscribed to `__start__`:
    its versions_seen shows it once it has run (it saw `__start__`), and on a thread's first
    step, before that, its writes' task path does (`~__pregel_pull, <node>`) when the step
    has any."""
    named = sorted(
        node for node, seen in seen_by_node.items()
        if node != START and node not in NOT_NODES and isinstance(seen, dict) and START in seen
    )
    if named or START in seen_by_node:
        return named or [START]
    branches = {channel[len(BRANCH_PREFIX):] for channel in versions if channel.startswith(BRANCH_PREFIX)}
    from_writes = set()
    for write in writes:
        parts = str(getattr(write, "task_path", "")).split(", ")
        if len(parts) == 2 and parts[0].lstrip("~") == PULL and parts[1] and parts[1] not in branches:
            from_writes.add(parts[1])
    return sorted(from_writes) or [START]


def _pull_candidates(versions: dict[str, Any], start_nodes: list[str]) -> list[str]:
    names = set()
    for channel in versions:
        if channel == START:
            names.update(start_nodes)
        elif channel.startswith(BRANCH_PREFIX):
            names.add(channel[len(BRANCH_PREFIX):])
        elif channel.startswith(JOIN_PREFIX) and channel.count(":") >= 2:
            names.add(channel.rsplit(":", 1)[1])
    # LangGraph goes through the graph's nodes in their order, which starts with the entry.
    return sorted(names, key=lambda name: (name not in start_nodes, name))


def _triggers(name: str, versions: dict[str, Any], start_nodes: list[str]) -> list[str]:
    """The node's trigger channels, as the compiled graph lists them (sorted, as LangGraph hashes them)."""
    if name in start_nodes:
        return [START]
    joins = [channel for channel in versions if channel.startswith(JOIN_PREFIX) and channel.endswith(f":{name}")]
    return sorted([f"{BRANCH_PREFIX}{name}", *joins])


def _step(metadata: Any) -> int:
    step = metadata.get("step") if isinstance(metadata, dict) else None
    return step + 1 if isinstance(step, int) and not isinstance(step, bool) else 0


def graph_tasks(checkpoint: dict[str, Any], *, checkpoint_ns: str, metadata: Any, writes: Any = ()) -> list[Task]:
    """The tasks LangGraph prepares from a checkpoint (its next step): PUSH ones first, then PULL
    ones. `writes`, the checkpoint's pending writes, name the functional API's entrypoint on a
    thread's first step (`_start_nodes`)."""
    values = checkpoint.get("channel_values") if isinstance(checkpoint.get("channel_values"), dict) else {}
    versions = checkpoint.get("channel_versions") if isinstance(checkpoint.get("channel_versions"), dict) else {}
    seen_by_node = checkpoint.get("versions_seen") if isinstance(checkpoint.get("versions_seen"), dict) else {}
    step = str(_step(metadata))

    def ns_of(node: str) -> str:
        return f"{checkpoint_ns}{NS_SEP}{node}" if checkpoint_ns else node

    tasks = []
    packets = values.get(TASKS)
    for index, packet in enumerate(packets if isinstance(packets, list) else []):
        node = send_node(packet)
        if node is not None:
            ident = task_id(checkpoint, ns_of(node), step, node, PUSH, str(index))
            tasks.append(Task(id=ident, name=node, path=[PUSH, index, False]))
    start_nodes = _start_nodes(seen_by_node, writes, versions) if START in versions else []
    for node in _pull_candidates(versions, start_nodes):
        triggers = _triggers(node, versions, start_nodes)
        seen = seen_by_node.get(node)
        # A join channel's value is a blob here, so only plain triggers can be seen to fire.
        plain_triggers = [channel for channel in triggers if not channel.startswith(JOIN_PREFIX)]
        if isinstance(seen, dict):
            fired = any(
                channel in values and version_key(versions.get(channel)) > version_key(seen.get(channel))
                for channel in plain_triggers
            )
        else:
            fired = any(channel in values for channel in plain_triggers)
        if fired:
            ident = task_id(checkpoint, ns_of(node), step, node, PULL, *triggers)
            tasks.append(Task(id=ident, name=node, path=[PULL, node]))
    return tasks


def is_functional(checkpoint: dict[str, Any], writes: Any = ()) -> bool:
    """Whether a LangGraph checkpoint is of the functional API's entrypoint rather than a
    StateGraph: it has the `__end__` channel the entrypoint's output goes to, or its `__start__`
    triggers a node of another name (`_start_nodes`, on a thread's first step)."""
    versions = checkpoint.get("channel_versions") if isinstance(checkpoint.get("channel_versions"), dict) else {}
    if END in versions:
        return True
    seen_by_node = checkpoint.get("versions_seen") if isinstance(checkpoint.get("versions_seen"), dict) else {}
    return START in versions and _start_nodes(seen_by_node, writes, versions) != [START]


def entry_output(checkpoint: dict[str, Any], tasks: list[Task], *, live: bool) -> Any:
    """The functional API's state as LangGraph reads it: the entrypoint's output (the `__end__`
    channel), None before it has one; live, a finished task's output counts."""
    values = checkpoint.get("channel_values") if isinstance(checkpoint.get("channel_values"), dict) else {}
    output = values.get(END)
    if live:
        for task in tasks:
            if task.finished:
                output = next((value for channel, value in task.output if channel == END), output)
    return plain(output)


def next_node_names(checkpoint: Any) -> list[str]:
    """The nodes of the next step (sorted, each once): what `next_node_id` stores."""
    if not isinstance(checkpoint, dict):
        return []
    return sorted({task.name for task in graph_tasks(checkpoint, checkpoint_ns="", metadata=None)})


def interrupt_items(write) -> list[dict[str, Any]]:
    """An `__interrupt__` write's interrupts as `{"value", "id"}` (LangGraph's Interrupt shape)."""
    items = write.value if isinstance(write.value, list) else [write.value]
    found = []
    for item in items:
        envelope = lc_envelope(item)
        fields = envelope[1] if envelope else {"value": item}
        found.append({"value": plain(fields.get("value")), "id": str(fields.get("id") or write.task_id)})
    return found


def attach_writes(tasks: list[Task], writes) -> list[Task]:
    """Give each task what its pending writes say (LangGraph's `read_task_statuses`)."""
    by_id = {task.id: task for task in tasks if task.id}
    for write in writes:
        task = by_id.get(write.task_id)
        if task is None or write.task_id == NULL_TASK_ID:
            continue
        if write.channel == INTERRUPT:
            task.interrupts.extend(interrupt_items(write))
        elif write.channel == ERROR:
            if task.error is None:
                task.error = write.value
        elif write.channel not in CONTROL_WRITES:
            task.output.append((write.channel, write.value))
    return tasks


def task_result(task: Task) -> dict[str, Any] | Any | None:
    """A finished task's result as LangGraph reports it: its return value, or the functional API's
    entrypoint's output (`__end__`), or else its writes to state keys."""
    if not task.finished:
        return None
    for channel, value in task.output:
        if channel == RETURN:
            return plain(value)
    for channel, value in task.output:
        if channel == END:  # the functional API's entrypoint: its output is the `__end__` channel's value alone
            return plain(value)
    result: dict[str, Any] = {}
    for channel, value in task.output:
        if is_internal_channel(channel):
            continue
        earlier = result.get(channel)
        # LangGraph folds repeated writes to one channel into {"$writes": [...]}.
        if earlier is not None:
            many = earlier["$writes"] if isinstance(earlier, dict) and "$writes" in earlier else [earlier]
            result[channel] = {"$writes": [*many, plain(value)]}
        else:
            result[channel] = plain(value)
    return result
