"""Demo checkpoints: real LangGraph graphs run in-process through the API and the services."""

from __future__ import annotations

import pytest

from memoryadmin.demo import checkpoints as checkpoint_demo
from sessions_app.models import Checkpoint
from sessions_app.checkpoints.langgraph import thread_detail

from ..conftest import login_client


@pytest.mark.django_db(transaction=True)
def test_the_demo_leaves_a_resumed_run_and_a_paused_one_with_a_subgraph(alice, bob, admin_user, operator, client):
    checkpoint_demo.load({"alice": alice, "bob": bob, "admin": admin_user, "operator": operator})

    refund = thread_detail(actor=alice, thread_id="refund-A-1042")
    assert refund["status"] == "idle" and refund["values"]["refunded"] is True
    assert refund["values"]["messages"][-1]["content"].startswith("Your refund of 49.9 EUR")
    steps = list(Checkpoint.objects.filter(thread__thread_id="refund-A-1042").order_by("id").values_list("node_id", "next_node_id"))
    assert steps == [("__input__", "__start__"), ("__start__", "triage"), ("triage", "lookup"), ("lookup", "approve"), ("approve", "")]

    invoice = thread_detail(actor=alice, thread_id="invoice-B-7731")
    assert invoice["status"] == "error"

    brief = thread_detail(actor=bob, thread_id="heat-pump-brief")
    assert brief["status"] == "interrupted" and brief["values"]["sources"]
    namespaces = set(Checkpoint.objects.filter(thread__thread_id="heat-pump-brief").values_list("checkpoint_ns", flat=True))
    assert "" in namespaces and any(ns.startswith("write_up:") for ns in namespaces)

    login_client(client, admin_user)
    page = client.get("/threads/refund-A-1042/checkpoints/").content.decode()
    assert "lookup → approve" in page and "Your refund of 49.9 EUR is on its way." in page


@pytest.mark.django_db
def test_without_langgraph_the_demo_writes_saver_style_checkpoints(alice, bob):
    checkpoint_demo._without_langgraph({"alice": alice, "bob": bob})
    detail = thread_detail(actor=alice, thread_id="workflow-A-1042")
    assert detail["checkpoints"] == 3 and detail["status"] == "interrupted"
    assert list(Checkpoint.objects.order_by("-id").values_list("node_id", flat=True)) == ["approve", "lookup", ""]
