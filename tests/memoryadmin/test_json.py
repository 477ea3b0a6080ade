"""JSON text in and out (memoryadmin/json.py): the renderer, the parser, the database's text, the
hash's canonical form, and the depth probe of memoryadmin/jsoncheck.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memoryadmin import json as mjson
from memoryadmin.json import ORJSONRenderer
from memoryadmin.jsoncheck import ORJSON_DEPTH, depth_exceeds, json_depth, json_problem


def test_it_writes_integers_beyond_64_bits():
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    body = ORJSONRenderer().render({"n": 10**20, "at": at, 3: "int key"})
    assert json.loads(body) == {"n": 10**20, "at": "2026-01-02T03:04:05Z", "3": "int key"}
    # The ordinary path answers the same shape.
    assert json.loads(ORJSONRenderer().render({"n": 1, "at": at})) == {"n": 1, "at": "2026-01-02T03:04:05Z"}


def test_what_neither_encoder_can_write_is_still_an_error():
    with pytest.raises(TypeError):
        ORJSONRenderer().render({"x": object()})


@pytest.mark.django_db
def test_big_numbers_in_stored_json_read_back(alice_api):
    # PostgreSQL's jsonb turns 1e20 into the integer 100000000000000000000 on the way back.
    metadata = {"big": 1e20, "edge": 18446744073709551616.0, "small": -1e19}
    response = alice_api.post("/api/v1/threads", {"thread_id": "big", "metadata": metadata}, format="json")
    assert response.status_code == 201
    for answer in (response, alice_api.get("/api/v1/threads/big"), alice_api.patch("/api/v1/threads/big", {}, format="json")):
        assert answer.status_code in (200, 201)
        assert {key: float(value) for key, value in answer.json()["metadata"].items()} == metadata


# --- the depth probe -------------------------------------------------------------------------------

def lists(depth: int, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def mixed(depth: int, leaf=1):
    value = leaf
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


@pytest.mark.parametrize("limit", [1, 64, 128, 200, 253, 254, 300])
@pytest.mark.parametrize("build", [lists, mixed])
def test_the_depth_probe_is_exact_at_its_limit(limit, build):
    import orjson

    # What the probe relies on: orjson writes ORJSON_DEPTH levels and refuses one more.
    orjson.dumps(build(ORJSON_DEPTH))
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(build(ORJSON_DEPTH + 1))
    assert json_depth(build(limit)) == limit
    assert not depth_exceeds(build(limit), limit) and depth_exceeds(build(limit + 1), limit)
    # An integer orjson cannot write sends the probe to the walk, which answers the same.
    assert not depth_exceeds(build(limit, 2**70), limit) and depth_exceeds(build(limit + 1, 2**70), limit)


def test_the_check_walks_any_depth_and_names_the_path():
    assert json_problem({"a": [{"b": lists(20_000)}]}, depth_max=64, where="metadata") == (
        "metadata.a[0].b" + "[0]" * 61, "is nested deeper than 64 levels"
    )
    zero = {"x": [-0.0, 1], "y": -0.0}
    assert json_problem(zero, depth_max=64) is None and repr(zero) == "{'x': [0.0, 1], 'y': 0.0}"
    assert json_problem({"n": 10**100}, depth_max=64)[1] == "holds an integer of more than 100 digits"
    assert json_problem({"n": 10**100 - 1}, depth_max=64) is None


# --- client JSON ------------------------------------------------------------------------------------


def test_the_parser_reads_integers_exactly_and_refuses_what_is_not_json():
    assert mjson.loads(b'{"a": 1180591620717411303424, "b": [1e16, -0.0], "c": "12345678901234567890123"}') == {
        "a": 2**70, "b": [1e16, -0.0], "c": "12345678901234567890123"
    }
    assert type(mjson.loads(b"[1e16]")[0]) is float and type(mjson.loads(b"[18446744073709551616]")[0]) is int
    for bad in (b"[NaN]", b"[Infinity]", b'["\\ud800"]', b"[1e400]", b"[" * 1025 + b"]" * 1025):
        with pytest.raises(ValueError):
            mjson.loads(bad)


def test_the_parser_names_the_field_that_is_too_deep():
    with pytest.raises(mjson.DepthExceeded) as caught:
        mjson.loads(b'{"fine": [[1]], "deep": ' + b"[" * 200 + b"]" * 200 + b"}", depth_max=160)
    assert caught.value.field == "deep" and caught.value.limit == 160
    with pytest.raises(mjson.DepthExceeded) as caught:
        mjson.loads(b"[" * 200 + b"]" * 200, depth_max=160)
    assert caught.value.field == "body"


@pytest.mark.parametrize("kind", [bytes, str])
def test_a_text_with_fewer_containers_than_the_limit_skips_the_probe_and_one_with_more_is_probed(kind):
    """The shortcut counts brackets and braces, strings included: never fewer than the containers."""
    padding = '"' + "x" * 400 + '"'
    exact = "[" * 160 + padding + "]" * 160
    over = "[" * 161 + padding + "]" * 161
    assert json_depth(mjson.loads(kind(exact, "ascii") if kind is bytes else exact, depth_max=160)) == 160
    with pytest.raises(mjson.DepthExceeded):
        mjson.loads(kind(over, "ascii") if kind is bytes else over, depth_max=160)
    # Brackets inside strings push the count over the limit: the probe then decides, rightly.
    flat = '{"text": "' + "[{" * 300 + '", "list": [[1]]}'
    assert mjson.loads(kind(flat, "ascii") if kind is bytes else flat, depth_max=160)["list"] == [[1]]
    assert json_depth(mjson.stored_loads("[" * 201 + padding + "]" * 201)) == 200
    assert json_depth(mjson.stored_loads("[" * 200 + padding + "]" * 200)) == 200


# --- the database's text ----------------------------------------------------------------------------


def test_doubles_are_written_so_that_jsonb_keeps_them_doubles():
    values = {"a": 1e16, "b": -1.5e17, "c": 1.2345678901234568e17, "d": 1e-7, "s": "1e+16 stays"}
    text = mjson.db_text(values)
    assert text == '{"a":10000000000000000.0,"b":-150000000000000000.0,"c":123456789012345680.0,"d":1e-7,"s":"1e+16 stays"}'
    # With an integer orjson does not write, the standard encoder writes the text, rewritten alike.
    text = mjson.db_text({**values, "n": 10**20})
    assert '"a":10000000000000000.0' in text and '"n":100000000000000000000' in text
    assert json.loads(text) == {**values, "n": 10**20}


@pytest.mark.django_db
def test_postgresql_gives_the_text_back_with_the_same_numbers():
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("jsonb is PostgreSQL's")
    values = {"a": 1e16, "b": 1.5e17, "c": 1e20, "d": -1.5e300, "e": 2**70, "f": 5e-324, "g": 0.1}
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb::text", [mjson.db_text(values)])
        back = mjson.stored_loads(cursor.fetchone()[0])
    assert {k: (type(v), v) for k, v in back.items()} == {k: (type(v), v) for k, v in values.items()}


def test_stored_text_is_read_with_exact_integers_and_cut_where_too_deep():
    assert mjson.stored_loads('{"n": 1180591620717411303424}') == {"n": 2**70}
    deep = '{"a": ' + "[" * 300 + '"x"' + "]" * 300 + ', "b": "[not {structure"}'
    value = mjson.stored_loads(deep, depth_max=10)
    assert json_depth(value) == 10 and value["b"] == "[not {structure"
    assert value["a"] == lists(9, mjson.DEEP_MARKER)
    beyond = "[" * 5000 + "]" * 5000  # deeper than any parser reads
    assert json_depth(mjson.stored_loads(beyond)) == 200
    assert mjson.stored_loads("[" * 300 + "]" * 300, depth_max=None) == lists(299, [])
    with pytest.raises(ValueError):
        mjson.stored_loads("not json")


# --- text out and the canonical form ------------------------------------------------------------------


def test_dumps_writes_big_integers_and_marks_what_is_too_deep():
    assert mjson.dumps({"n": 2**70}) == b'{"n":1180591620717411303424}'
    written = json.loads(mjson.dumps(lists(1000)))
    assert json_depth(written) == ORJSON_DEPTH and mjson.DEEP_MARKER in json.dumps(written)
    assert mjson.pretty({"n": 2**70, 1: lists(900)}).startswith('{\n  "1": [')


def test_the_canonical_form_keeps_integers_and_zeroes_negative_zero_only_as_a_number():
    assert mjson.canonical({"b": 2**70, "a": -0.0}) == b'{"a":0.0,"b":1180591620717411303424}'
    assert mjson.canonical([-0.0, "-0.0", -0.05, {"k": -0.0}]) == b'[0.0,"-0.0",-0.05,{"k":0.0}]'
    assert mjson.canonical(-0.0) == b"0.0"
    with pytest.raises(TypeError, match="nested deeper than 254 levels"):
        mjson.canonical(lists(300))
