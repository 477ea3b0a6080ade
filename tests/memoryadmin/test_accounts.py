"""Users, roles and keys managed in the dashboard, behind the same services as `manage.py apikey`."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from memoryadmin import accounts, roles
from memoryadmin.apikeys import apikey_authenticate
from memoryadmin.errors import Conflict, Forbidden, InvalidInput
from memoryadmin.models import ApiKey, AuditEvent

from ..conftest import login_client

pytestmark = pytest.mark.django_db


def test_an_admin_issues_a_key_shown_once_and_revokes_it(client, admin_user, alice):
    login_client(client, admin_user)
    page = client.post("/keys/create", {"username": "alice", "name": "billing"}).content.decode()
    plaintext = re.search(r'id="issued-key">(ma_[0-9a-f]+_[\w-]+)<', page).group(1)
    key = apikey_authenticate(plaintext)
    assert key is not None and key.owner == alice and key.name == "billing"
    listing = client.get("/keys/").content.decode()
    assert key.prefix in listing and plaintext not in listing  # shown once only
    response = client.post("/keys/revoke", {"prefix": key.prefix})
    assert response.status_code == 302 and apikey_authenticate(plaintext) is None
    actions = list(AuditEvent.objects.filter(target=f"apikey:{key.prefix}").values_list("action", "detail__via"))
    assert actions == [("apikey.revoke", "dashboard"), ("apikey.create", "dashboard")]


def test_a_key_for_a_new_user_creates_the_user_in_the_chosen_role(client, admin_user):
    login_client(client, admin_user)
    client.post("/keys/create", {"username": "robot-7", "create_user": "1", "role": "operator"})
    robot = get_user_model().objects.get(username="robot-7")
    assert roles.role_of(robot) == "operator" and not robot.has_usable_password()
    missing = client.post("/keys/create", {"username": "nobody"})
    assert missing.status_code == 404 and "create the user first" in missing.content.decode()


def test_an_admin_creates_users_and_changes_roles(client, admin_user, alice):
    login_client(client, admin_user)
    assert client.post("/users/create", {"username": "carol", "role": "operator", "password": "a-long-pass-phrase-42"}).status_code == 302
    carol = get_user_model().objects.get(username="carol")
    assert roles.role_of(carol) == "operator" and carol.check_password("a-long-pass-phrase-42")
    weak = client.post("/users/create", {"username": "dave", "role": "member", "password": "123"})
    assert weak.status_code == 400 and not get_user_model().objects.filter(username="dave").exists()
    taken = client.post("/users/create", {"username": "carol", "role": "member"})
    assert taken.status_code == 409
    client.post("/users/role", {"username": "alice", "role": "admin"})
    alice.refresh_from_db()
    assert roles.role_of(get_user_model().objects.get(pk=alice.pk)) == "admin"
    assert AuditEvent.objects.filter(action="user.role_set", target="user:alice", detail__role="admin").exists()
    page = client.get("/users/").content.decode()
    assert "carol" in page and "operator" in page


def test_an_admin_cannot_demote_themselves(admin_user):
    with pytest.raises(Conflict):
        accounts.account_role_set(actor=admin_user, username=admin_user.username, role="member")


@pytest.mark.parametrize("who", ["operator", "alice"])
def test_operators_and_members_see_no_key_or_user_controls_and_their_posts_are_403(client, who, request, alice):
    actor = request.getfixturevalue(who)
    login_client(client, actor)
    home = client.get("/threads/").content.decode()
    assert "/keys/" not in home and "/users/" not in home
    before = ApiKey.objects.count(), get_user_model().objects.count()
    for url, data in [("/keys/", None), ("/users/", None), ("/keys/create", {"username": "alice"}),
                      ("/keys/revoke", {"prefix": "abcd"}), ("/users/create", {"username": "x", "role": "admin"}),
                      ("/users/role", {"username": "alice", "role": "admin"})]:
        response = client.get(url) if data is None else client.post(url, data)
        assert response.status_code == 403, url
    assert (ApiKey.objects.count(), get_user_model().objects.count()) == before
    with pytest.raises(Forbidden):
        accounts.account_key_issue(actor=actor, username="alice")


def test_bad_input_names_the_field(admin_user):
    for call, field in [
        (lambda: accounts.account_user_create(actor=admin_user, username="a b", role="member"), "username"),
        (lambda: accounts.account_user_create(actor=admin_user, username="ok", role="root"), "role"),
        (lambda: accounts.account_key_revoke(actor=admin_user, prefix="ZZ\n"), "prefix"),
        (lambda: accounts.account_key_issue(actor=admin_user, username="ok", name="x" * 101), "name"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            call()
        assert field in caught.value.fields


def test_hostile_names_stay_text_on_the_pages(client, admin_user):
    accounts.account_key_issue(actor=admin_user, username=admin_user.username, name="<script>alert(1)</script>")
    login_client(client, admin_user)
    page = client.get("/keys/").content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize("count", [2, 30])
def test_the_key_and_user_pages_cost_constant_queries(client, admin_user, count, django_assert_num_queries):
    for i in range(count):
        accounts.account_key_issue(actor=admin_user, username=f"agent-{i}", create_user=True)
    login_client(client, admin_user)
    with django_assert_num_queries(4):  # session, user, role, keys
        assert client.get("/keys/").status_code == 200
    with django_assert_num_queries(5):  # session, user, role, users with counts, their groups
        assert client.get("/users/").status_code == 200
