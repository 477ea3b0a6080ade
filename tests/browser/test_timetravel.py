"""Time travel, the JSON viewer, the retention dry run and confirmations, and console bugs, in a real browser."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from .conftest import shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo():
    call_command("demo_data", stdout=StringIO())


def test_the_api_docs_page_is_clean_under_the_content_security_policy(page, live_server, demo):
    sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .info .title")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("memoryadmin API")
    page.wait_for_timeout(500)
    assert page.errors == []
