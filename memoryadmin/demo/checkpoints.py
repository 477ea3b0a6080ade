"""Demo checkpoints: small LangGraph graphs run in this process, checkpointed in memoryadmin.

The graphs use `MemoryAdminSaver` exactly as an agent would, but its HTTP
requests are handed to this Django process (no server needed): every write goes
through the API views and the checkpoint services. Without LangGraph installed,
a few checkpoints are written through the services instead.
"""

# No `from __future__ import annotations` here: the graphs' state classes are
# defined inside functions, and LangGraph reads their annotations as objects.
import logging
import operator
import threading
from typing import Annotated, Any, TypedDict

import httpx
from django.conf import settings
from django.db import connections
from django.test import Client

from memoryadmin.apikeys import apikey_create, apikey_revoke

from sessions_app.checkpoints.services import checkpoint_input, checkpoint_put, checkpoint_put_writes, write_input


def _an_allowed_host() -> str:
    """A Host header this deployment accepts (DJANGO_ALLOWED_HOSTS may name only its own)."""
    for host in settings.ALLOWED_HOSTS:
        if host != "*":
            return host.lstrip(".")
    return "localhost"


class InProcessTransport(httpx.BaseTransport):
    """An httpx transport that answers from this Django process, with an API key of `user`.

    The key is made for the run and revoked by `close()`.

    LangGraph calls its checkpointer from worker threads; requests are handled one
    at a time (as a single-worker server would), and a worker thread's database
    connection is closed after its request, as Django does at the end of one.
    """

    def __init__(self, user):
        self.key = apikey_create(owner=user, name="checkpoint demo")
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {self.key.plaintext}", HTTP_HOST=_an_allowed_host())
        self.lock = threading.Lock()

    def close(self) -> None:
        apikey_revoke(prefix=self.key.api_key.prefix)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        with self.lock:
            # A graph's first read of a new thread is an expected 404; keep the command's output quiet.
            request_log = logging.getLogger("django.request")
            level = request_log.level
            request_log.setLevel(logging.ERROR)
            try:
                response = self.client.generic(
                    request.method,
                    request.url.raw_path.decode(),
                    data=body,
                    content_type=request.headers.get("content-type", "application/json"),
                    HTTP_ACCEPT="application/json",
                )
            finally:
                request_log.setLevel(level)
                if threading.current_thread() is not threading.main_thread():
                    connections.close_all()
        return httpx.Response(response.status_code, headers=dict(response.items()), content=response.content)


def _saver(user):
    from memoryadmin_client.langgraph import MemoryAdminSaver

    # Closing the saver closes its transport, which revokes the key.
    return MemoryAdminSaver("http://memoryadmin.local", transport=InProcessTransport(user))


def _refund_graph():
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.types import interrupt

    class Refund(TypedDict, total=False):
        messages: Annotated[list, add_messages]
        order: dict[str, Any]
        steps: Annotated[list[str], operator.add]
        refunded: bool

    def triage(state: Refund) -> dict:
        call = {"name": "lookup_order", "args": {"order_id": "A-1042"}, "id": "call-lookup-1"}
        return {"messages": [AIMessage("Let me look up order A-1042.", tool_calls=[call])], "steps": ["triage"]}

    def lookup(state: Refund) -> dict:
        order = {"id": "A-1042", "item": "Rain jacket", "amount": 49.9, "currency": "EUR", "status": "delivered"}
        return {
            "messages": [ToolMessage('{"status": "delivered", "amount": 49.9}', tool_call_id="call-lookup-1", name="lookup_order")],
            "order": order,
            "steps": ["lookup"],
        }

    def approve(state: Refund) -> dict:
        order = state["order"]
        answer = interrupt({"question": f"Refund {order['amount']} {order['currency']} for order {order['id']}?"})
        if answer == "approve":
            reply = f"Your refund of {order['amount']} {order['currency']} is on its way."
        else:
            reply = "A colleague declined the refund; we will contact you."
        return {"messages": [AIMessage(reply)], "refunded": answer == "approve", "steps": ["approve"]}

    builder = StateGraph(Refund)
    builder.add_node("triage", triage)
    builder.add_node("lookup", lookup)
    builder.add_node("approve", approve)
    builder.add_edge(START, "triage")
    builder.add_edge("triage", "lookup")
    builder.add_edge("lookup", "approve")
    builder.add_edge("approve", END)
    return builder


def _research_graph():
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.types import interrupt

    class Research(TypedDict, total=False):
        messages: Annotated[list, add_messages]
        sources: list[str]
        draft: str

    def summarise(state: Research) -> dict:
        return {"draft": "Heat pumps cut heating emissions by 50-70% against gas boilers in most EU grids."}

    def review(state: Research) -> dict:
        verdict = interrupt({"draft": state["draft"], "ask": "Publish this summary?"})
        return {"messages": [AIMessage(f"Reviewer said: {verdict}")]}

    inner = StateGraph(Research)
    inner.add_node("summarise", summarise)
    inner.add_node("review", review)
    inner.add_edge(START, "summarise")
    inner.add_edge("summarise", "review")
    inner.add_edge("review", END)

    def gather(state: Research) -> dict:
        return {"sources": ["iea.org/heat-pumps-2024", "ember-climate.org/eu-grid"], "messages": [AIMessage("Found two sources.")]}

    builder = StateGraph(Research)
    builder.add_node("gather", gather)
    builder.add_node("write_up", inner.compile())
    builder.add_edge(START, "gather")
    builder.add_edge("gather", "write_up")
    builder.add_edge("write_up", END)
    return builder


class BillingTimeout(Exception):
    """What the demo's billing tool raises: an upstream API that did not answer."""


def _invoice_graph():
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    class Invoice(TypedDict, total=False):
        messages: Annotated[list, add_messages]

    def plan(state: Invoice) -> dict:
        call = {"name": "fetch_invoice", "args": {"invoice_id": "B-7731"}, "id": "call-invoice-1"}
        return {"messages": [AIMessage("Fetching invoice B-7731.", tool_calls=[call])]}

    def fetch_invoice(state: Invoice) -> dict:
        raise BillingTimeout("billing API did not answer within 10 s (invoice B-7731)")

    builder = StateGraph(Invoice)
    builder.add_node("plan", plan)
    builder.add_node("fetch_invoice", fetch_invoice)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "fetch_invoice")
    builder.add_edge("fetch_invoice", END)
    return builder


def _with_langgraph(users: dict) -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.types import Command

    alice, bob = users["alice"], users["bob"]

    # Alice's support agent: paused for a human's approval, then resumed.
    with _saver(alice) as saver:
        graph = _refund_graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "refund-A-1042"}, "metadata": {"agent": "support-bot"}}
        graph.invoke({"messages": [HumanMessage("My rain jacket leaks, can I get a refund for order A-1042?")]}, config)
        graph.invoke(Command(resume="approve"), config)

    # Alice's billing agent: its tool failed, the error kept as LangGraph keeps it (status "error").
    with _saver(alice) as saver:
        graph = _invoice_graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "invoice-B-7731"}, "metadata": {"agent": "billing-bot"}}
        try:
            graph.invoke({"messages": [HumanMessage("Why was I charged twice on invoice B-7731?")]}, config)
        except BillingTimeout:
            pass

    # Bob's research agent: a subgraph (its own namespace) still waiting for review.
    with _saver(bob) as saver:
        graph = _research_graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "heat-pump-brief"}, "metadata": {"agent": "research-bot"}}
        graph.invoke({"messages": [HumanMessage("Summarise the emissions case for heat pumps.")]}, config)


def _without_langgraph(users: dict) -> None:
    """A saver-style history: three snapshots of a workflow, the last one awaiting approval."""
    alice = users["alice"]
    states = [
        ({"node": "start", "order": None}, {"step": 0, "source": "input"}, "", "lookup"),
        ({"node": "lookup", "order": {"id": "A-1042", "amount": 49.9}}, {"step": 1, "source": "loop"}, "lookup", "approve"),
        ({"node": "approve", "order": {"id": "A-1042", "amount": 49.9}, "awaiting": "human"}, {"step": 2, "source": "loop"}, "approve", ""),
    ]
    parent = None
    for state, metadata, node, next_node in states:
        result = checkpoint_put(
            actor=alice,
            thread_id="workflow-A-1042",
            data=checkpoint_input(
                checkpoint={"channel_values": state},
                metadata=metadata,
                parent_checkpoint_id=parent,
                node_id=node,
                next_node_id=next_node,
            ),
        )
        parent = result.checkpoint_id
    checkpoint_put_writes(
        actor=alice,
        thread_id="workflow-A-1042",
        checkpoint_id=parent,
        data=write_input(task_id="approve-1", writes=[{"channel": "__interrupt__", "value": [{"value": "Refund 49.9 EUR?"}]}]),
    )


def load(users: dict) -> None:
    try:
        import langgraph.graph  # noqa: F401
    except ImportError:
        _without_langgraph(users)
    else:
        httpx_log = logging.getLogger("httpx")
        level = httpx_log.level
        httpx_log.setLevel(logging.WARNING)  # one line per request is noise in a setup command
        try:
            _with_langgraph(users)
        finally:
            httpx_log.setLevel(level)
