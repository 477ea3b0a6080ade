"""Access rules decided in one place (memoryadmin/policy.py).

Every service that writes, in every app and in operations, is listed in WRITES
and walked: each refuses an operator with Forbidden and writes nothing; each
succeeds for whom its rule allows; and each follows `policy.decide` when that
decision is patched (deny all: even the owner is refused; allow all: even an
operator gets through), so no service decides on its own. A scan of the source
shows no module outside policy.py compares roles or owners.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from graphs_app import services as graphs
from memoryadmin import accounts, apikeys, policy, roles
from memoryadmin.errors import Forbidden
from memoryadmin.models import ApiKey
from memoryadmin.operations import bulk, erase, retention
from memoryadmin.operations.models import RetentionPolicy
from sessions_app.checkpoints import lifecycle
from sessions_app.checkpoints import services as checkpoints
from sessions_app.checkpoints import state_update
from sessions_app.models import Thread
from sessions_app.threads import services as threads
from sessions_app.threads import append
from sessions_app.turns import services as turns_svc
from store_app import services as store
from store_app.models import StoreItem

from ..ops.helpers import checkpoints as make_checkpoints
from ..ops.helpers import save, store_item, table_counts, turns

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
SPEC = {"nodes": [{"id": "a"}], "edges": [{"source": "__start__", "target": "a"}, {"source": "a", "target": "__end__"}]}


@pytest.fixture
def world(alice, admin_user):
    """One of everything, owned by alice: a thread with checkpoints and turns, a store item, a graph,
    a retention policy, an API key, and a bulk job an admin started."""
    save(alice, "t1", turns(4))
    make_checkpoints(alice, "t1", 2)
    Thread.objects.filter(thread_id="t1").update(agent_code="bot")
    for name in ("cp-a", "cp-b"):
        checkpoints.checkpoint_put(
            actor=alice, thread_id="t1", checkpoint_id=name,
            data=checkpoints.checkpoint_input(checkpoint={"channel_values": {}}, metadata={"run_id": "run-1"}),
        )
    lg = {"channel_values": {"note": "n", "branch:to:agent": None}, "channel_versions": {"note": 1, "branch:to:agent": 1},
          "versions_seen": {"__input__": {}, "__start__": {"__start__": 1}}}
    checkpoints.checkpoint_put(actor=alice, thread_id="t1", checkpoint_id="lg-1",
                               data=checkpoints.checkpoint_input(checkpoint=lg, node_id="__start__"))
    turns_svc.turn_begin(actor=alice, thread_id="t1", question="first?")
    turns_svc.turn_append_chunk(actor=alice, thread_id="t1", text="an answer")
    turns_svc.turn_finish(actor=alice, thread_id="t1")
    turns_svc.turn_begin(actor=alice, thread_id="t1", question="second?")
    store_item(alice, ["users", "alice"], "k")
    graph = graphs.graph_create(actor=alice, name="g", spec=SPEC).graph
    retention.retention_policy_save(actor=admin_user, agent_code="bot", keep_checkpoints=5)
    key = apikeys.apikey_create(owner=alice).api_key
    save(alice, "t-bulk", turns(2))
    job = bulk.bulk_start(actor=admin_user, action="clear", selection=bulk.Selection(ids=("t-bulk",)))
    return SimpleNamespace(alice=alice, graph=graph, key=key, job=job)


def _data():
    return checkpoints.checkpoint_input(checkpoint={"channel_values": {"v": 1}})


def _writes():
    return checkpoints.write_input(task_id="task-x", writes=[{"channel": "c", "value": 1}])


OWNER, ADMIN = "owner", "admin"

# Every service that writes: (who its rule allows, the call). Each call is valid input on an
# object alice owns, so a refusal of it can only be the access rule.
WRITES = {
    "sessions_app.threads.services.thread_save_agent_state": (OWNER, lambda a, w: threads.thread_save_agent_state(
        actor=a, thread_id="t1", agent_code="bot", context=turns(6))),
    "sessions_app.threads.append.thread_append_messages": (OWNER, lambda a, w: append.thread_append_messages(
        actor=a, thread_id="t1", agent_code="bot", messages=turns(2))),
    "sessions_app.threads.services.thread_clear": (ADMIN, lambda a, w: threads.thread_clear(actor=a, thread_id="t1")),
    # A bulk clear's batch: thread_clear's rule for every thread of it.
    "sessions_app.threads.services.threads_clear": (ADMIN, lambda a, w: threads.threads_clear(
        actor=a, thread_pks=[Thread.objects.get(thread_id="t1").pk])),
    "sessions_app.threads.services.thread_delete": (OWNER, lambda a, w: threads.thread_delete(actor=a, thread_id="t1")),
    # A bulk purge's batch: thread_delete's rule for every thread of it.
    "sessions_app.threads.services.threads_delete": (OWNER, lambda a, w: threads.threads_delete(
        actor=a, thread_pks=[Thread.objects.get(thread_id="t1").pk])),
    "sessions_app.checkpoints.services.checkpoint_put": (OWNER, lambda a, w: checkpoints.checkpoint_put(
        actor=a, thread_id="t1", data=_data())),
    "sessions_app.checkpoints.services.checkpoint_replace": (OWNER, lambda a, w: checkpoints.checkpoint_replace(
        actor=a, thread_id="t1", checkpoint_id="cp-a", data=_data())),
    "sessions_app.checkpoints.services.checkpoint_put_writes": (OWNER, lambda a, w: checkpoints.checkpoint_put_writes(
        actor=a, thread_id="t1", checkpoint_id="cp-a", data=_writes())),
    "sessions_app.checkpoints.state_update.thread_update_state": (OWNER, lambda a, w: state_update.thread_update_state(
        actor=a, thread_id="t1", values={"note": "x"}, checkpoint_id="lg-1")),
    "sessions_app.checkpoints.state_update.checkpoint_fork": (OWNER, lambda a, w: state_update.checkpoint_fork(
        actor=a, thread_id="t1", checkpoint_id="lg-1", values='{"note": "x"}')),
    "sessions_app.checkpoints.lifecycle.checkpoint_release": (ADMIN, lambda a, w: lifecycle.checkpoint_release(
        actor=a, thread_id="t1")),
    # A bulk release's batch: checkpoint_release's rule for every thread of it.
    "sessions_app.checkpoints.lifecycle.checkpoints_release": (ADMIN, lambda a, w: lifecycle.checkpoints_release(
        actor=a, thread_pks=[Thread.objects.get(thread_id="t1").pk])),
    "sessions_app.checkpoints.lifecycle.checkpoint_delete_thread": (OWNER, lambda a, w: lifecycle.checkpoint_delete_thread(
        actor=a, thread_id="t1")),
    "sessions_app.checkpoints.lifecycle.checkpoint_prune": (OWNER, lambda a, w: lifecycle.checkpoint_prune(
        actor=a, thread_ids=["t1"])),
    "sessions_app.checkpoints.lifecycle.checkpoint_delete_for_runs": (OWNER, lambda a, w: lifecycle.checkpoint_delete_for_runs(
        actor=a, run_ids=["run-1"])),
    "sessions_app.checkpoints.lifecycle.checkpoint_copy_thread": (OWNER, lambda a, w: lifecycle.checkpoint_copy_thread(
        actor=a, source_thread_id="t1", target_thread_id="t1-copy")),
    "sessions_app.checkpoints.lifecycle.thread_create": (OWNER, lambda a, w: lifecycle.thread_create(actor=a)),
    "sessions_app.checkpoints.lifecycle.thread_update_metadata": (OWNER, lambda a, w: lifecycle.thread_update_metadata(
        actor=a, thread_id="t1", metadata={"k": 1})),
    "sessions_app.turns.services.turn_begin": (OWNER, lambda a, w: turns_svc.turn_begin(actor=a, thread_id="t1", question="q")),
    "sessions_app.turns.services.turn_append_chunk": (OWNER, lambda a, w: turns_svc.turn_append_chunk(
        actor=a, thread_id="t1", text="x")),
    "sessions_app.turns.services.turn_finish": (OWNER, lambda a, w: turns_svc.turn_finish(actor=a, thread_id="t1")),
    "sessions_app.turns.services.turn_discard": (OWNER, lambda a, w: turns_svc.turn_discard(actor=a, thread_id="t1")),
    "sessions_app.turns.services.turn_restart": (OWNER, lambda a, w: turns_svc.turn_restart(actor=a, thread_id="t1")),
    "store_app.services.store_item_put": (OWNER, lambda a, w: store.store_item_put(
        actor=a, namespace=["users", "alice"], key="k", value={"v": 2})),
    "store_app.services.store_item_delete": (OWNER, lambda a, w: store.store_item_delete(
        actor=a, namespace=["users", "alice"], key="k")),
    "store_app.services.store_clear": (ADMIN, lambda a, w: store.store_clear(actor=a, namespace=("users",))),
    "graphs_app.services.graph_create": (OWNER, lambda a, w: graphs.graph_create(actor=a, name="another", spec=SPEC)),
    "graphs_app.services.graph_update": (OWNER, lambda a, w: graphs.graph_update(actor=a, graph_id=w.graph.pk, name="renamed")),
    "graphs_app.services.graph_delete": (OWNER, lambda a, w: graphs.graph_delete(actor=a, graph_id=w.graph.pk)),
    "memoryadmin.operations.bulk.bulk_start": (ADMIN, lambda a, w: bulk.bulk_start(
        actor=a, action="purge", selection=bulk.Selection(ids=("t1",)))),
    "memoryadmin.operations.bulk.bulk_step": (ADMIN, lambda a, w: bulk.bulk_step(actor=a, job_id=w.job.pk)),
    "memoryadmin.operations.retention.retention_policy_save": (ADMIN, lambda a, w: retention.retention_policy_save(
        actor=a, agent_code="other", keep_checkpoints=1)),
    "memoryadmin.operations.retention.retention_policy_delete": (ADMIN, lambda a, w: retention.retention_policy_delete(
        actor=a, agent_code="bot")),
    "memoryadmin.operations.retention.retention_apply": (ADMIN, lambda a, w: retention.retention_apply(actor=a)),
    "memoryadmin.operations.erase.user_erase": (ADMIN, lambda a, w: erase.user_erase(actor=a, username="alice")),
    "memoryadmin.operations.erase.user_erase_start": (ADMIN, lambda a, w: erase.user_erase_start(actor=a, username="alice")),
    "memoryadmin.operations.retention.retention_enqueue": (ADMIN, lambda a, w: retention.retention_enqueue(actor=a)),
    "memoryadmin.apikeys.apikey_create": (ADMIN, lambda a, w: apikeys.apikey_create(owner=w.alice, actor=a)),
    "memoryadmin.apikeys.apikey_revoke": (ADMIN, lambda a, w: apikeys.apikey_revoke(prefix=w.key.prefix, actor=a)),
    "memoryadmin.accounts.account_user_create": (ADMIN, lambda a, w: accounts.account_user_create(
        actor=a, username="zed", role="member")),
    "memoryadmin.accounts.account_role_set": (ADMIN, lambda a, w: accounts.account_role_set(
        actor=a, username="alice", role="operator")),
    "memoryadmin.accounts.account_key_issue": (ADMIN, lambda a, w: accounts.account_key_issue(actor=a, username="alice")),
    "memoryadmin.accounts.account_key_revoke": (ADMIN, lambda a, w: accounts.account_key_revoke(actor=a, prefix=w.key.prefix)),
}

# Public functions of the service modules that take an actor and write nothing (or are the check itself).
NOT_WRITES = {
    "sessions_app.turns.services.turn_context": "reads",
    "sessions_app.turns.services.context_preview": "reads",
    "memoryadmin.operations.bulk.selection_threads": "reads",
    "memoryadmin.operations.bulk.bulk_preview": "reads (admins for destructive actions)",
    "memoryadmin.operations.bulk.bulk_job_get": "reads (admins)",
    "memoryadmin.operations.bulk.ensure_allowed": "the check itself, through policy",
    "memoryadmin.operations.retention.ensure_admin": "the check itself, through policy",
    "memoryadmin.operations.retention.retention_preview": "reads (admins)",
    "memoryadmin.operations.retention_draft.retention_preview_draft": "reads (admins): the dry run of a policy not saved",
    "memoryadmin.operations.retention.retention_runs": "reads (operators and admins)",
    "memoryadmin.operations.retention.retention_policies": "reads (operators and admins)",
    "memoryadmin.operations.erase.user_erase_preview": "reads (admins)",
    "memoryadmin.operations.erase.user_erase_job_get": "reads (admins)",
    "store_app.services.store_ttl_refresh": "refreshes the reader's own items only (test below)",
    "memoryadmin.accounts.account_users": "reads (admins)",
    "memoryadmin.accounts.account_keys": "reads (admins)",
    "sessions_app.checkpoints.savedviews.saved_view_save": "a user's own saved view, operators' too (test_triage.py)",
    "sessions_app.checkpoints.savedviews.saved_view_delete": "a user's own saved view, operators' too (test_triage.py)",
    "sessions_app.threads.services.ensure_writer": "the check itself, through policy",
    "sessions_app.threads.services.ensure_can_write_at_all": "the check itself, through policy",
    "sessions_app.threads.services.lock_or_create": "a step of the saves, after their check",
    "sessions_app.threads.services.guarded_append": "a step of the saves, after their check",
    "sessions_app.threads.services.head_rows": "a read of the saves' fast path, which then checks (policy.may_write)",
}
SERVICE_MODULES = (
    "sessions_app.threads.services",
    "sessions_app.threads.append",
    "sessions_app.checkpoints.services",
    "sessions_app.checkpoints.savedviews",
    "sessions_app.checkpoints.lifecycle",
    "sessions_app.checkpoints.state_update",
    "sessions_app.turns.services",
    "store_app.services",
    "graphs_app.services",
    "memoryadmin.operations.bulk",
    "memoryadmin.operations.retention",
    "memoryadmin.operations.retention_draft",
    "memoryadmin.operations.erase",
    "memoryadmin.apikeys",
    "memoryadmin.accounts",
)


def snapshot():
    thread = Thread.objects.filter(thread_id="t1").values_list("updated_at", "metadata", "active_count").first()
    item = StoreItem.objects.values_list("value", "expires_at").first()
    keys = list(ApiKey.objects.values_list("prefix", "revoked_at"))
    policies = list(RetentionPolicy.objects.values_list("agent_code", "keep_checkpoints"))
    return table_counts(), thread, item, keys, policies


def test_the_walk_lists_every_service_that_takes_an_actor():
    found = set()
    for name in SERVICE_MODULES:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if attr.startswith("_") or not inspect.isfunction(value) or value.__module__ != name:
                continue
            if "actor" in inspect.signature(value).parameters:
                found.add(f"{name}.{attr}")
    assert found == set(WRITES) | set(NOT_WRITES)


@pytest.mark.parametrize("name", sorted(WRITES))
def test_every_write_refuses_an_operator_and_writes_nothing(world, operator, name):
    before = snapshot()
    with pytest.raises(Forbidden) as refused:
        WRITES[name][1](operator, world)
    assert refused.value.message == "Operators have read-only access."
    assert refused.value.action in policy.RULES and refused.value.target
    assert snapshot() == before


@pytest.mark.parametrize("name", sorted(WRITES))
def test_every_write_is_allowed_to_whom_its_rule_names(world, admin_user, name):
    """The walk's calls are valid: the owner (or an admin, for admins' actions) gets through."""
    who, call = WRITES[name]
    call(world.alice if who == OWNER else admin_user, world)


@pytest.mark.parametrize("name", sorted(WRITES))
def test_every_write_follows_the_one_decision_when_it_denies(world, admin_user, name, monkeypatch):
    monkeypatch.setattr(policy, "decide", lambda actor, action, owner_id=None: policy.Decision(False, "admin_only"))
    who, call = WRITES[name]
    before = snapshot()
    with pytest.raises(Forbidden):
        call(world.alice if who == OWNER else admin_user, world)
    assert snapshot() == before


# A store put is one atomic upsert whose WHERE clause keeps a key its owner's (two writers
# of one key race inside the statement, so the owner test cannot run before it): an allowed
# non-owner write of an existing key would still be refused there. The policy is asked first
# (operators are refused before the statement) and names the owner in the refusal.
ENFORCED_IN_THE_STATEMENT = {"store_app.services.store_item_put"}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_every_write_follows_the_one_decision_when_it_allows(world, operator, name, monkeypatch):
    """Allow everything and even an operator's write goes through: no service re-checks a role itself."""
    if name in ENFORCED_IN_THE_STATEMENT:
        pytest.skip("the key's owner is kept by the upsert itself (see ENFORCED_IN_THE_STATEMENT)")
    monkeypatch.setattr(policy, "decide", lambda actor, action, owner_id=None: policy.Decision(True))
    WRITES[name][1](operator, world)


def test_the_ttl_refresh_keeps_only_the_readers_own_items_alive(world, operator, admin_user):
    item = StoreItem.objects.get()
    StoreItem.objects.filter(pk=item.pk).update(ttl=timedelta(hours=1))
    item.refresh_from_db()
    for reader in (operator, admin_user):
        assert store.store_ttl_refresh(actor=reader, items=[item]) == 0
    assert store.store_ttl_refresh(actor=world.alice, items=[item]) == 1


# --- the rules themselves -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "member_own", "member_other", "operator_ok", "admin_other"),
    [
        ("thread.read", True, False, True, True),
        ("thread.write", True, False, False, False),
        ("thread.delete", True, False, False, True),
        ("thread.clear", False, False, False, True),
        ("store.delete", True, False, False, True),
        ("store.put", True, False, False, False),
        ("graph.write", True, False, False, False),
        ("retention.read", False, False, True, True),
        ("audit.read", False, False, False, True),
    ],
)
def test_decide_follows_the_table(alice, bob, operator, admin_user, action, member_own, member_other, operator_ok, admin_other):
    assert policy.decide(alice, action, alice.pk).allowed is member_own
    assert policy.decide(alice, action, bob.pk).allowed is member_other
    assert policy.decide(operator, action, alice.pk).allowed is operator_ok
    assert policy.decide(admin_user, action, alice.pk).allowed is admin_other
    assert policy.decide(None, action, alice.pk).allowed is False


def test_an_unknown_action_is_a_programming_error(alice):
    with pytest.raises(ValueError):
        policy.decide(alice, "thread.frobnicate")


def test_restrict_and_the_dashboards_flags(alice, bob, operator, admin_user):
    save(alice, "a1", turns(1))
    save(bob, "b1", turns(1))
    seen = {user.username: sorted(policy.restrict(Thread.objects.all(), user).values_list("thread_id", flat=True))
            for user in (alice, operator, admin_user)}
    assert seen == {"alice": ["a1"], "olivia": ["a1", "b1"], "adam": ["a1", "b1"]}
    assert not policy.restrict(Thread.objects.all(), operator, "thread.delete").exists()
    assert policy.restrict(Thread.objects.all(), admin_user, "thread.write").count() == 0  # no admin's own threads
    assert [policy.may_write(u, owner_id=None, action="thread.create") for u in (alice, operator, admin_user)] == [True, False, True]
    assert [policy.abilities(u)["user_is_admin"] for u in (alice, operator, admin_user)] == [False, False, True]


def test_the_documented_table_is_the_policys():
    text = (ROOT / "docs" / "architecture.md").read_text()
    documented = dict(re.findall(r"^\| `([a-z_]+(?:\.[a-z_]+)?)` \| ([^|]+?) \|", text, flags=re.MULTILINE))
    assert documented == {action: rule.who() for action, rule in policy.RULES.items()}


# --- the rule comes from one place ----------------------------------------------------------------


def _sources():
    for folder in ("memoryadmin", "sessions_app", "store_app", "graphs_app"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path, ast.parse(path.read_text(), filename=str(path))


# Modules that read a role to store or show it, never to decide with it.
ROLE_READERS = {
    "memoryadmin/policy.py",
    "memoryadmin/roles.py",
    "memoryadmin/admin.py",  # the audit event of a role change in the Django admin
    "memoryadmin/apikeys.py",  # caches the role read with the key
    "memoryadmin/operations/erase.py",  # the preview shows the user's role
    "memoryadmin/management/commands/apikey.py",
    "memoryadmin/management/commands/demo_data.py",
    "memoryadmin/accounts.py",  # sets and lists users' roles (the admin decides through policy first)
    "memoryadmin/accounts_views.py",  # says which role a user now has
}


def test_roles_keeps_only_role_storage():
    assert not [name for name in ("is_admin", "is_operator", "can_read_all") if hasattr(roles, name)]


def test_no_module_outside_policy_decides_on_roles_or_owners():
    offenders = []
    for path, tree in _sources():
        where = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            # Comparing an object's owner with someone: an ownership rule.
            if isinstance(node, ast.Compare) and where != "memoryadmin/policy.py":
                operands = [node.left, *node.comparators]
                if any(isinstance(o, ast.Attribute) and o.attr == "owner_id" for o in operands):
                    offenders.append(f"{where}:{node.lineno} compares owner_id")
            # Reading a role outside the modules that store or show it.
            role_reads = ("role_of", "is_admin", "is_operator", "can_read_all", "is_superuser", "is_staff")
            if isinstance(node, ast.Attribute) and node.attr in role_reads and where not in ROLE_READERS:
                offenders.append(f"{where}:{node.lineno} reads a role ({node.attr})")
            # Filtering a list down to the actor's own rows: visibility, which policy.restrict decides.
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("filter", "exclude"):
                owner_kwargs = [k for k in node.keywords if k.arg and k.arg.split("__")[-1] == "owner"
                                and isinstance(k.value, ast.Name) and k.value.id == "actor"]
                if owner_kwargs and len(node.keywords) == 1 and where != "memoryadmin/policy.py":
                    offenders.append(f"{where}:{node.lineno} filters by the actor's ownership")
    assert offenders == []
