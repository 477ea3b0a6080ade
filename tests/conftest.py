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


def message_envelope(kind: str, **kwargs) -> dict:
    """A LangChain message (`kind`: "AIMessage", ...) as LangChain serialises it and a LangGraph checkpoint holds it."""
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", kind], "kwargs": kwargs}


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


class AsgiServer:
    """The production ASGI application (memoryadmin.asgi) served by uvicorn on a thread of the test
    process, against the test database: what gunicorn's workers run, direct calls included."""

    def __init__(self):
        import socket
        import threading

        import uvicorn

        from memoryadmin.asgi import application

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(application, host="127.0.0.1", port=port, lifespan="off", log_level="warning", loop="asyncio")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                return
            import time

            time.sleep(0.01)
        raise RuntimeError("uvicorn did not start")

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def asgi_server(transactional_db, settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    server = AsgiServer()
    try:
        yield server
    finally:
        server.stop()
