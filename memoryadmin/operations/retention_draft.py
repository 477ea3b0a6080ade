"""The dry run of a retention policy not saved (docs/operations.md, "Retention"): the rules of
`retention`, with the form's values in place of the saved policy of its agent. Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from memoryadmin.errors import InvalidInput
from memoryadmin.operations.models import RetentionPolicy
# The steps of a saved policy's dry run, shared so that both dry runs select alike.
from memoryadmin.operations.retention import (
    RULES,
    Impact,
    _agent_code,
    _policies,
    _policy_values,
    _preview_selection,
    _selection,
    ensure_admin,
    policy_snapshot,
)
from sessions_app.threads.models import Thread


@dataclass
class DraftReport:
    """A dry run of a policy not saved: what it would remove now, and the first threads it touches."""

    now: datetime
    policy: dict[str, Any]
    impact: Impact
    threads: list[dict[str, Any]]  # thread_id, agent_code, rules: the first `sample` touched


def retention_preview_draft(*, actor, agent_code: Any = "", now: datetime | None = None, sample: int = 20, **rules: Any) -> DraftReport:
    """The dry run of the form's values, saved or not: the same selection and counts as `retention_preview`,
    with this policy in place of the saved one of its agent (if any). Reads only; writes nothing."""
    agent_code = _agent_code(agent_code)
    ensure_admin(actor, "retention.preview")
    unknown = sorted(set(rules) - set(RULES))
    if unknown:
        raise InvalidInput(f"{unknown[0]} is not a retention rule.", fields={unknown[0]: ["is not a retention rule."]})
    draft = RetentionPolicy(agent_code=agent_code, **_policy_values(agent_code, *(rules.get(rule) for rule in RULES)))
    now = now or timezone.now()
    policies = [p for p in _policies() if p.agent_code != agent_code] + [draft]
    selection = _selection(draft, policies, now)
    touched: dict[str, dict[str, Any]] = {}
    picks = [
        ("release", selection.idle_threads),
        ("keep", None if selection.pruned_threads is None else Thread.objects.filter(
            pk__in=selection.excess_checkpoints().values("thread_id"))),
        ("purge", None if selection.blocks is None else Thread.objects.filter(pk__in=selection.blocks.values("thread_id"))),
    ]
    for rule, threads in picks:
        for thread_id, agent in [] if threads is None else threads.order_by("pk").values_list("thread_id", "agent_code")[:sample]:
            touched.setdefault(thread_id, {"thread_id": thread_id, "agent_code": agent, "rules": []})["rules"].append(rule)
    shown = sorted(touched.values(), key=lambda row: row["thread_id"])[:sample]
    return DraftReport(now=now, policy=policy_snapshot(draft), impact=_preview_selection(selection), threads=shown)
