"""Request metrics are labelled from fixed sets: nothing a caller sends adds a series."""

from __future__ import annotations

import random
import string

import pytest

from memoryadmin.metrics import HTTP_LATENCY, HTTP_REQUESTS

pytestmark = pytest.mark.django_db


def series() -> set[tuple]:
    return {
        (sample.name, tuple(sorted(sample.labels.items())))
        for metric in (HTTP_REQUESTS, HTTP_LATENCY)
        for family in metric.collect()
        for sample in family.samples
    }


def made_up(rng: random.Random, length: int = 12) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(length))


def test_fifty_made_up_methods_and_paths_add_no_series(client):
    rng = random.Random(7)
    kinds = [
        lambda: client.generic(made_up(rng).upper(), "/healthz"),  # a route, a method it has never heard of
        lambda: client.generic(made_up(rng).upper(), f"/{made_up(rng)}"),  # neither
        lambda: client.get(f"/{made_up(rng)}/{made_up(rng)}"),  # no route
        lambda: client.get(f"/api/v1/{made_up(rng)}"),
        lambda: client.generic(made_up(rng).upper(), "/api/v1/threads"),
    ]
    for kind in kinds:  # each kind once: the series it adds are the fixed ones
        kind()
    before = series()
    for _ in range(50):
        for kind in kinds:
            kind()
    after = series()
    assert after == before
    methods = {dict(labels).get("method") for _, labels in after}
    assert "other" in methods and not methods - {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
    assert "unmatched" in {dict(labels).get("route") for _, labels in after}
