"""Shared fixtures: users of each role, API clients authenticated by real API keys."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from memoryadmin import roles
from memoryadmin.apikeys import apikey_create

IS_POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))


def make_user(username: str, role: str = "member", password: str = "pw-for-tests-1"):
    user = get_user_model().objects.create_user(username=username, password=password)
    roles.role_set(user, role)
    return user


def api_client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {apikey_create(owner=user).plaintext}")
    return client


@pytest.fixture
def alice(db):
    return make_user("alice")


@pytest.fixture
def bob(db):
    return make_user("bob")


@pytest.fixture
def operator(db):
    return make_user("olivia", "operator")


@pytest.fixture
def admin_user(db):
    return make_user("adam", "admin")


@pytest.fixture
def alice_api(alice):
    return api_client_for(alice)


@pytest.fixture
def bob_api(bob):
    return api_client_for(bob)


@pytest.fixture
def operator_api(operator):
    return api_client_for(operator)


@pytest.fixture
def admin_api(admin_user):
    return api_client_for(admin_user)


@pytest.fixture
def anon_api():
    return APIClient()


def login_client(client, user):
    client.force_login(user)
    return client
