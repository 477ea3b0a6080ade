"""What the framework adapters' tests share: running a coroutine, reading what the server stored."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from io import StringIO
from typing import Any

from django.core.management import call_command

from memoryadmin_client import HTTPClient

from sessions_app.models import Block, Thread


def run_async(coroutine_function: Callable[[], Awaitable[Any]], *, closing: Sequence[HTTPClient] = ()) -> Any:
    """asyncio.run in a thread of its own: the test's thread may already hold a loop
    (Playwright's sync API keeps one while a browser runs in the session).

    The async connections the `closing` clients opened in that loop are closed at
    its end, so the live server's keep-alive threads let go of their database
    connections (PostgreSQL will not drop a test database still in use).
    """
    outcome: dict[str, Any] = {}

    async def main() -> Any:
        try:
            return await coroutine_function()
        finally:
            for client in list(closing):
                await client.aclose()

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the coroutine did not finish in 120 s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def blocks_of(thread_id: str, *, archived: bool | None = None) -> list[Block]:
    """The thread's blocks in seq order (active, archived or both)."""
    rows = Block.objects.filter(thread__thread_id=thread_id)
    if archived is not None:
        rows = rows.filter(archived=archived)
    return list(rows.order_by("seq"))


def row_counts() -> tuple[int, int]:
    """How many threads and blocks the database holds: a refused request changes neither."""
    return Thread.objects.count(), Block.objects.count()


def verify_output() -> str:
    """`manage.py verify` over everything stored; fails the test on any broken invariant."""
    out, err = StringIO(), StringIO()
    try:
        call_command("verify", stdout=out, stderr=err)
    except SystemExit as exc:  # verify exits 1 when it finds a problem
        raise AssertionError(f"manage.py verify exited {exc.code}: {out.getvalue()}{err.getvalue()}") from None
    return out.getvalue()
