"""LangGraph's checkpointer conformance suite, run against MemoryAdminSaver and a live server.

The server is the production ASGI application (the `asgi_server` fixture: direct calls included).
`langgraph-checkpoint-conformance` is driven as its README and `validate.py` say:
register an async factory with `@checkpointer_test`, run `validate()`, read the
report. It detects which optional capabilities the saver implements (by the
overridden async methods) and runs their suites too.
"""

from __future__ import annotations

import asyncio

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from memoryadmin.apikeys import apikey_create
from memoryadmin_client.langgraph import MemoryAdminSaver

pytestmark = pytest.mark.django_db(transaction=True)


def test_memoryadmin_saver_passes_every_capability_of_the_conformance_suite(asgi_server, alice, capsys):
    key = apikey_create(owner=alice).plaintext

    @checkpointer_test(name="MemoryAdminSaver")
    async def memoryadmin_saver():
        saver = MemoryAdminSaver(asgi_server.url, key)
        try:
            yield saver
        finally:
            await saver.aclose()
            saver.close()

    report = asyncio.run(validate(memoryadmin_saver, progress=ProgressCallbacks.verbose()))
    report.print_report()
    results = report.to_dict()["results"]
    failures = {name: result["failures"] for name, result in results.items() if result["failures"]}
    assert failures == {}
    assert {name for name, result in results.items() if result["detected"]} == {cap.value for cap in ALL_CAPABILITIES}
    assert report.conformance_level() == "FULL"
    passed = sum(result["tests_passed"] for result in results.values())
    print(f"conformance: {passed} checks passed over {len(results)} capabilities")
