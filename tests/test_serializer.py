from __future__ import annotations

import enum
import json
import pickle
import re
import uuid
from collections import OrderedDict, namedtuple
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import models
from hypothesis import given, settings
from hypothesis import strategies as st

from django_zqueue.exceptions import InvalidArgument, ZQueueError
from django_zqueue.tasks.serializer import (
    MARKER,
    MalformedPayload,
    ModelInstanceMissing,
    UnsupportedArgument,
    decode_call,
    encode_call,
)
from testproject.demo.models import Article, Token

PARIS = ZoneInfo("Europe/Paris")
UID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def through_json(args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
    """Encode, send through strict JSON, decode: what a worker gets."""
    wire = json.dumps(encode_call(args, kwargs or {}), allow_nan=False)
    return decode_call(json.loads(wire))


def assert_identical(decoded: Any, original: Any) -> None:
    # repr tells apart what == forgives: 1 vs 1.0 vs True, list vs tuple, Decimal("1.0")
    # vs Decimal("1.00"), tzinfo and fold of datetimes, dict order.
    assert repr(decoded) == repr(original)


def json_only(value: Any) -> bool:
    if isinstance(value, dict):
        return all(type(k) is str and json_only(v) for k, v in value.items())
    if isinstance(value, list):
        return all(json_only(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


# --- plain JSON and the wire format -------------------------------------------------------


def test_plain_json_is_written_as_itself() -> None:
    args: tuple[Any, ...] = (1, -2.5, "é✓", None, True, False, [], {}, [1, [2, {"k": [3.0]}]])
    kwargs: dict[str, Any] = {"a": {"b": {"c": None}}, "n": 10**30}
    encoded = encode_call(args, kwargs)
    assert encoded == {"args": list(args), "kwargs": kwargs}
    assert type(encoded["args"]) is list
    args_back, kwargs_back = decode_call(json.loads(json.dumps(encoded)))
    assert_identical(args_back, args)
    assert_identical(kwargs_back, kwargs)


def test_encode_does_not_alias_or_mutate_its_input() -> None:
    inner = {MARKER: 1, "x": [1]}
    args = ([inner],)
    encoded = encode_call(args, {})
    assert inner == {MARKER: 1, "x": [1]}
    assert encoded["args"][0] is not args[0]
    encoded["args"][0].append("changed")
    assert args == ([inner],)


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ((1, "a"), {MARKER: "tuple", "v": [1, "a"]}),
        ((), {MARKER: "tuple", "v": []}),
        (
            datetime(2024, 5, 1, 12, 0, 0, 1, tzinfo=UTC),
            {MARKER: "datetime", "v": "2024-05-01T12:00:00.000001+00:00"},
        ),
        (datetime(2024, 5, 1, 12, 30), {MARKER: "datetime", "v": "2024-05-01T12:30:00"}),
        (
            datetime(2024, 5, 1, 12, tzinfo=PARIS),
            {MARKER: "datetime", "v": "2024-05-01T12:00:00+02:00", "tz": "Europe/Paris"},
        ),
        (
            datetime(2024, 5, 1, 12, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
            {MARKER: "datetime", "v": "2024-05-01T12:00:00-05:30"},
        ),
        (
            datetime(2021, 10, 31, 2, 30, fold=1, tzinfo=PARIS),
            {MARKER: "datetime", "v": "2021-10-31T02:30:00+01:00", "tz": "Europe/Paris", "fold": 1},
        ),
        (date(2024, 5, 1), {MARKER: "date", "v": "2024-05-01"}),
        (time(12, 0, 0, 1), {MARKER: "time", "v": "12:00:00.000001"}),
        (time(23, 59, tzinfo=UTC), {MARKER: "time", "v": "23:59:00+00:00"}),
        (time(8, tzinfo=PARIS), {MARKER: "time", "v": "08:00:00", "tz": "Europe/Paris"}),
        (timedelta(days=-1, seconds=5, microseconds=6), {MARKER: "timedelta", "v": [-1, 5, 6]}),
        (Decimal("1.50"), {MARKER: "decimal", "v": "1.50"}),
        (Decimal("-0"), {MARKER: "decimal", "v": "-0"}),
        (Decimal("1E+3"), {MARKER: "decimal", "v": "1E+3"}),
        (UID, {MARKER: "uuid", "v": "12345678-1234-5678-1234-567812345678"}),
        ({MARKER: 1}, {MARKER: "dict", "v": {MARKER: 1}}),
    ],
)
def test_tagged_wire_format_and_round_trip(value: Any, wire: dict[str, Any]) -> None:
    encoded = encode_call((value,), {"k": value})
    assert encoded == {"args": [wire], "kwargs": {"k": wire}}
    args, kwargs = through_json((value,), {"k": value})
    assert_identical(args, (value,))
    assert_identical(kwargs, {"k": value})


def test_nested_mix_round_trips_exactly() -> None:
    value = {
        "when": [datetime(2030, 1, 1, tzinfo=PARIS), (date(2030, 1, 2), time(0, 0, 0, 999999))],
        "money": {"total": Decimal("19.990"), "parts": (Decimal("9.99"), Decimal("10.000"))},
        "ids": ((UID, uuid.UUID(int=0)), [uuid.UUID(int=2**128 - 1)]),
        "spans": [timedelta(0), timedelta(microseconds=-1), timedelta.max, timedelta.min],
        "edges": [datetime.min, datetime.max, date.min, date.max, time.max],
        "floats": [0.0, -0.0, 1e308, -5e-324, 0.1],
        "ints": [0, -1, 2**64, -(2**63)],
        "bools": [True, False, 1, 0],
        "empty": [(), [], {}, ""],
    }
    args, kwargs = through_json((value, (value,)), {"v": value})
    assert_identical(args, (value, (value,)))
    assert_identical(kwargs, {"v": value})
    assert type(kwargs["v"]["bools"][0]) is bool and type(kwargs["v"]["bools"][2]) is int


def test_decimal_special_values_round_trip() -> None:
    values = [Decimal("NaN"), Decimal("-sNaN12"), Decimal("Infinity"), Decimal("-Infinity")]
    args, _ = through_json(tuple(values))
    assert [str(v) for v in args] == ["NaN", "-sNaN12", "Infinity", "-Infinity"]
    assert all(type(v) is Decimal for v in args)


# --- datetimes keep everything --------------------------------------------------------------


def test_aware_datetime_keeps_zone_offset_and_microseconds() -> None:
    value = datetime(2024, 7, 14, 9, 8, 7, 654321, tzinfo=PARIS)
    (back,), _ = through_json((value,))
    assert back == value
    assert back.tzinfo is PARIS  # the same zone object, not a fixed offset
    assert back.microsecond == 654321
    assert back.utcoffset() == timedelta(hours=2)


def test_utc_stays_the_utc_singleton_and_naive_stays_naive() -> None:
    (aware, naive), _ = through_json((datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 1)))
    assert aware.tzinfo is UTC
    assert naive.tzinfo is None


def test_ambiguous_wall_time_keeps_its_fold() -> None:
    first = datetime(2021, 10, 31, 2, 30, tzinfo=PARIS)
    second = first.replace(fold=1)
    (back_first, back_second), _ = through_json((first, second))
    assert (back_first.fold, back_second.fold) == (0, 1)
    assert back_first.utcoffset() == timedelta(hours=2)
    assert back_second.utcoffset() == timedelta(hours=1)
    assert back_second - back_first == timedelta(0)  # same zone: wall-clock subtraction
    assert back_second.astimezone(UTC) - back_first.astimezone(UTC) == timedelta(hours=1)


def test_wall_time_in_a_gap_is_kept() -> None:
    # 02:30 does not exist in Paris on 2021-03-28; converting through UTC would move it.
    value = datetime(2021, 3, 28, 2, 30, tzinfo=PARIS)
    (back,), _ = through_json((value,))
    assert (back.hour, back.minute, back.tzinfo) == (2, 30, PARIS)


def test_fold_is_kept_without_a_zone_too() -> None:
    values = (
        datetime(2024, 1, 1, fold=1),
        time(1, fold=1),
        datetime(2024, 1, 1, tzinfo=UTC, fold=1),
    )
    back, _ = through_json(values)
    assert [v.fold for v in back] == [1, 1, 1]
    assert back[2].tzinfo is UTC


def test_fixed_offset_time_round_trips() -> None:
    value = time(6, 30, 15, 1, tzinfo=timezone(timedelta(hours=5, minutes=45)))
    (back,), _ = through_json((value,))
    assert back.utcoffset() == timedelta(hours=5, minutes=45)
    assert_identical(back, value)


class NoOffset(tzinfo):
    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


@pytest.mark.parametrize(
    "value", [datetime(2024, 1, 1, tzinfo=NoOffset()), time(tzinfo=NoOffset())]
)
def test_tzinfo_without_offset_is_refused(value: datetime | time) -> None:
    with pytest.raises(TypeError, match=r"^args\[0\]\[1\]: .* has no fixed UTC offset"):
        encode_call(([1, value],), {})


@pytest.mark.parametrize("micro", [1, -1, 5])
def test_offsets_with_a_fraction_of_a_second_are_refused(micro: int) -> None:
    zone = timezone(timedelta(hours=1 if micro == 5 else 0, microseconds=micro))
    with pytest.raises(UnsupportedArgument, match=r"^args\[0\]: .*fraction of a second"):
        encode_call((datetime(2024, 1, 1, tzinfo=zone),), {})
    with pytest.raises(UnsupportedArgument, match=r"^kwargs\['t'\]: .*fraction of a second"):
        encode_call((), {"t": time(tzinfo=zone)})


# --- the marker key ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {MARKER: "date", "v": "2024-01-01"},  # looks exactly like a tagged date
        {MARKER: "model", "app_label": "demo", "model_name": "article", "pk": 1},
        {MARKER: "dict", "v": {MARKER: "tuple", "v": []}},
        {MARKER: None},
        {"a": {MARKER: [{MARKER: {MARKER: (1, date(2024, 1, 1))}}]}, MARKER: "x"},
    ],
)
def test_dicts_holding_the_marker_key_round_trip_as_dicts(value: dict[str, Any]) -> None:
    (back,), kwargs = through_json((value,), {"k": [value]})
    assert_identical(back, value)
    assert_identical(kwargs, {"k": [value]})


def test_a_keyword_argument_named_like_the_marker_is_not_escaped() -> None:
    encoded = encode_call((), {MARKER: "date", "v": 1})
    assert encoded["kwargs"] == {MARKER: "date", "v": 1}
    assert through_json((), {MARKER: "date", "v": 1}) == ((), {MARKER: "date", "v": 1})


# --- subclasses arrive as their base type -------------------------------------------------


class Color(enum.IntEnum):
    RED = 1


class Status(models.TextChoices):
    OPEN = "open"


class Ratio(float):
    pass


class FakeDatetime(datetime):  # what freezegun's datetime.now() returns
    pass


Point = namedtuple("Point", "x y")


def test_subclasses_are_sent_as_their_base_type() -> None:
    ordered = OrderedDict([("b", 1), ("a", Color.RED)])
    args = (Color.RED, Status.OPEN, Ratio(0.5), Point(1, 2), ordered, FakeDatetime(2024, 1, 1))
    back, kwargs = through_json(args, {Status.OPEN: 1})
    assert [type(v) for v in back] == [int, str, float, tuple, dict, datetime]
    assert back == (1, "open", 0.5, (1, 2), {"b": 1, "a": 1}, datetime(2024, 1, 1))
    assert list(back[4]) == ["b", "a"]
    assert [type(k) for k in kwargs] == [str]


def test_an_infinite_float_subclass_is_still_refused() -> None:
    with pytest.raises(InvalidArgument, match=r"^args\[0\]: float inf cannot be sent"):
        encode_call((Ratio("inf"),), {})


# --- what cannot be sent ------------------------------------------------------------------


class Plain(enum.Enum):
    A = 1


def a_function() -> None:
    pass


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        ({1, 2}, "set"),
        (frozenset(), "frozenset"),
        (b"raw", "bytes"),
        (bytearray(b"raw"), "bytearray"),
        (object(), "object"),
        (a_function, "function"),
        (lambda: None, "function"),
        (Plain.A, "Plain"),
        (1j, "complex"),
        (range(3), "range"),
        (iter([1]), "list_iterator"),
        (Path("/tmp"), Path("/tmp").__class__.__name__),
        (Article.objects.all(), "QuerySet"),
        (Article, "ModelBase"),
        (ZoneInfo("UTC"), "ZoneInfo"),
    ],
)
def test_unsupported_types_are_refused_with_their_path(value: Any, type_name: str) -> None:
    message = (
        f"objects of type {type_name!r} cannot be sent to a task; pass JSON data, model "
        "instances (sent by reference), datetimes, dates, Decimals or UUIDs"
    )
    with pytest.raises(TypeError, match="^" + re.escape(f"kwargs['user'][2]: {message}")) as exc:
        encode_call((), {"user": [1, 2, value]})
    assert isinstance(exc.value, UnsupportedArgument)
    assert isinstance(exc.value, ZQueueError)
    assert exc.value.path == "kwargs['user'][2]"
    with pytest.raises(UnsupportedArgument, match="^" + re.escape(f"args[0]: {message}")):
        encode_call((value,), {})


@pytest.mark.parametrize(
    ("args", "kwargs", "path"),
    [
        ((1, 2, {3}), {}, "args[2]"),
        (((0, (1, {3})),), {}, "args[0][1][1]"),
        (([{"a": [0, {3}]}],), {}, "args[0][0]['a'][1]"),
        (({MARKER: {"x": {3}}},), {}, "args[0]['__zq__']['x']"),
        ((), {"a": {"b": ({"c": [1, 2, 3, {3}]},)}}, "kwargs['a']['b'][0]['c'][3]"),
        ((), {"it's": {3}}, """kwargs["it's"]"""),
        ((1, 1, [1, 1, {3}]), {}, "args[2][2]"),
    ],
)
def test_path_points_at_the_value(args: tuple[Any, ...], kwargs: dict[str, Any], path: str) -> None:
    with pytest.raises(UnsupportedArgument, match="^" + re.escape(path + ": ")) as exc:
        encode_call(args, kwargs)
    assert exc.value.path == path


def test_same_object_twice_is_located_at_its_first_place() -> None:
    bad = {3}
    with pytest.raises(UnsupportedArgument) as exc:
        encode_call(([0, bad, bad],), {})
    assert exc.value.path == "args[0][1]"


@pytest.mark.parametrize(
    ("value", "path", "key"),
    [
        ({1: "a"}, "args[0]", "'int' (key 1)"),
        ({"ok": 1, None: 2}, "args[0]", "'NoneType' (key None)"),
        ([{"ok": {(1, 2): 3}}], "args[0][0]['ok']", "'tuple' (key (1, 2))"),
        ({b"k": 1}, "args[0]", "'bytes' (key b'k')"),
    ],
)
def test_non_str_dict_keys_are_refused(value: Any, path: str, key: str) -> None:
    expected = f"{path}: dict keys must be str, not {key}"
    with pytest.raises(TypeError, match="^" + re.escape(expected) + "$"):
        encode_call((value,), {})


def test_non_str_keyword_names_are_refused() -> None:
    with pytest.raises(UnsupportedArgument, match=r"^kwargs: dict keys must be str, not 'int'"):
        encode_call((), {1: "a"})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ("abc", {}, "args: must be a tuple, not 'str'"),
        ({1}, {}, "args: must be a tuple, not 'set'"),
        ((), [("a", 1)], "kwargs: must be a dict, not 'list'"),
    ],
)
def test_args_and_kwargs_containers_are_checked(args: Any, kwargs: Any, message: str) -> None:
    with pytest.raises(UnsupportedArgument, match="^" + re.escape(message) + "$"):
        encode_call(args, kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((float("nan"),), {}, "args[0]: float nan cannot be sent"),
        ((1.0, float("inf")), {}, "args[1]: float inf cannot be sent"),
        ((), {"x": {"y": (1, -float("inf"))}}, "kwargs['x']['y'][1]: float -inf cannot be sent"),
        (([{MARKER: float("nan")}],), {}, "args[0][0]['__zq__']: float nan cannot be sent"),
    ],
)
def test_non_finite_floats_are_value_errors(
    args: tuple[Any, ...], kwargs: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(expected)) as exc:
        encode_call(args, kwargs)
    assert isinstance(exc.value, InvalidArgument)
    assert not isinstance(exc.value, TypeError)


def test_reference_cycles_are_value_errors() -> None:
    looped: list[Any] = [1]
    looped.append(looped)
    with pytest.raises(InvalidArgument, match=r"^args: .*reference cycle"):
        encode_call((looped,), {})
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(InvalidArgument, match=r"^kwargs: .*reference cycle"):
        encode_call((), {"d": cyclic})


def test_the_same_object_twice_is_not_a_cycle() -> None:
    shared = [1, {"a": 2}]
    args, _ = through_json(([shared, shared],))
    assert args == ([[1, {"a": 2}], [1, {"a": 2}]],)


# --- model instances by reference ---------------------------------------------------------


@pytest.mark.django_db
def test_model_instance_is_sent_by_reference(django_assert_num_queries: Any) -> None:
    article = Article.objects.create(title="First", views=3)
    with django_assert_num_queries(0):
        encoded = encode_call((article,), {})
    assert encoded["args"] == [
        {MARKER: "model", "app_label": "demo", "model_name": "article", "pk": article.pk}
    ]
    Article.objects.filter(pk=article.pk).update(views=99)  # changed after enqueueing
    with django_assert_num_queries(1):
        (back,), _ = decode_call(json.loads(json.dumps(encoded)))
    assert type(back) is Article
    assert back.pk == article.pk
    assert back is not article
    assert (back.title, back.views) == ("First", 99)  # fetched again, not a snapshot


@pytest.mark.django_db
def test_uuid_primary_key_is_encoded_as_uuid() -> None:
    token = Token.objects.create(label="t")
    encoded = encode_call((), {"token": token})
    assert encoded["kwargs"]["token"] == {
        MARKER: "model",
        "app_label": "demo",
        "model_name": "token",
        "pk": {MARKER: "uuid", "v": str(token.pk)},
    }
    _, kwargs = decode_call(json.loads(json.dumps(encoded)))
    assert type(kwargs["token"]) is Token
    assert kwargs["token"].pk == token.pk
    assert kwargs["token"].label == "t"


@pytest.mark.django_db
def test_model_instances_nested_anywhere(django_assert_num_queries: Any) -> None:
    a1 = Article.objects.create(title="a1")
    a2 = Article.objects.create(title="a2")
    token = Token.objects.create(label="tk")
    value = {"list": [a1, (a2, token)], MARKER: {"token": token}}
    with django_assert_num_queries(4):
        (back,), _ = through_json((value,))
    assert [type(x) for x in (back["list"][0], *back["list"][1])] == [Article, Article, Token]
    assert [back["list"][0].title, back["list"][1][0].title] == ["a1", "a2"]
    assert back[MARKER]["token"].label == "tk"


@pytest.mark.django_db
def test_deleted_instance_raises_model_instance_missing() -> None:
    article = Article.objects.create(title="gone")
    pk = article.pk
    encoded = encode_call((), {"article": article})
    article.delete()
    with pytest.raises(ModelInstanceMissing) as exc:
        decode_call(encoded)
    assert isinstance(exc.value, LookupError) and isinstance(exc.value, ZQueueError)
    assert str(exc.value).startswith(f"demo.Article with pk={pk!r} no longer exists")
    assert (exc.value.model, exc.value.pk) == ("demo.Article", pk)


@pytest.mark.django_db
def test_deleted_uuid_instance_names_its_uuid() -> None:
    token = Token.objects.create(label="gone")
    encoded = encode_call((token,), {})
    Token.objects.all().delete()
    with pytest.raises(ModelInstanceMissing, match=re.escape(f"demo.Token with pk={token.pk!r}")):
        decode_call(encoded)


def test_unsaved_instance_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^args\[1\]\['a'\]: unsaved demo\.Article instance"):
        encode_call((1, {"a": Article(title="draft")}), {})


@pytest.mark.django_db
def test_unsaved_instance_with_a_default_pk_is_reported_missing_when_decoded() -> None:
    # Token() gets its uuid before saving, so it cannot be told from a saved one at encode.
    encoded = encode_call((Token(label="draft"),), {})
    with pytest.raises(ModelInstanceMissing, match=r"^demo\.Token with pk=UUID\("):
        decode_call(encoded)


@pytest.mark.django_db
def test_model_that_is_not_installed_is_malformed() -> None:
    data = {
        "args": [{MARKER: "model", "app_label": "demo", "model_name": "nope", "pk": 1}],
        "kwargs": {},
    }
    with pytest.raises(MalformedPayload, match=r"^args\[0\]: model 'demo\.nope' is not installed"):
        decode_call(data)


def test_errors_with_attributes_survive_pickling() -> None:
    missing = pickle.loads(pickle.dumps(ModelInstanceMissing("demo.Token", UID)))
    assert (missing.model, missing.pk, str(missing)) == (
        "demo.Token",
        UID,
        f"demo.Token with pk={UID!r} no longer exists (deleted after the task was enqueued?)",
    )
    unsupported = pickle.loads(pickle.dumps(UnsupportedArgument("args[0]", "no")))
    assert (unsupported.path, str(unsupported)) == ("args[0]", "args[0]: no")


# --- decoding data encode_call did not write ----------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        "{}",
        {"args": [], "kwargs": []},
        {"args": (), "kwargs": {}},
        {"kwargs": {}},
        {"args": []},
    ],
)
def test_decode_rejects_a_bad_envelope(data: Any) -> None:
    with pytest.raises(MalformedPayload, match=r"^expected \{'args': \[\.\.\.\]"):
        decode_call(data)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({MARKER: "frob", "v": 1}, "args[0][1]: unknown type tag 'frob'"),
        ({MARKER: 3}, "args[0][1]: unknown type tag 3"),
        ({MARKER: ["tuple"], "v": []}, "args[0][1]: unknown type tag ['tuple']"),
        ({MARKER: "tuple", "v": {}}, "args[0][1]: malformed 'tuple' value"),
        ({MARKER: "tuple"}, "args[0][1]: malformed 'tuple' value"),
        ({MARKER: "dict", "v": []}, "args[0][1]: malformed 'dict' value"),
        ({MARKER: "date", "v": "2024-13-01"}, "args[0][1]: malformed 'date' value"),
        ({MARKER: "date"}, "args[0][1]: malformed 'date' value"),
        ({MARKER: "datetime", "v": 1714564800}, "args[0][1]: malformed 'datetime' value"),
        ({MARKER: "datetime", "v": "2024-01-01", "tz": "Mars/Olympus"}, "malformed 'datetime'"),
        ({MARKER: "datetime", "v": "2024-01-01", "tz": 1}, "malformed 'datetime'"),
        ({MARKER: "datetime", "v": "2024-01-01", "fold": 7}, "malformed 'datetime'"),
        ({MARKER: "time", "v": "25:00"}, "args[0][1]: malformed 'time' value"),
        ({MARKER: "timedelta", "v": [1, 2]}, "args[0][1]: malformed 'timedelta' value"),
        ({MARKER: "timedelta", "v": [1.5, 0, 0]}, "args[0][1]: malformed 'timedelta' value"),
        ({MARKER: "timedelta", "v": [10**10, 0, 0]}, "args[0][1]: malformed 'timedelta' value"),
        ({MARKER: "decimal", "v": "one"}, "args[0][1]: malformed 'decimal' value"),
        ({MARKER: "decimal", "v": 1.5}, "args[0][1]: malformed 'decimal' value"),
        ({MARKER: "uuid", "v": "xyz"}, "args[0][1]: malformed 'uuid' value"),
        ({MARKER: "uuid", "v": 5}, "args[0][1]: malformed 'uuid' value"),
        ({MARKER: "model", "app_label": "demo", "pk": 1}, "args[0][1]: malformed 'model' value"),
        (
            {MARKER: "tuple", "v": [0, {"k": {MARKER: "uuid", "v": "?"}}]},
            "args[0][1][1]['k']: malformed 'uuid' value",
        ),
        (
            {MARKER: "model", "app_label": "demo", "model_name": "token", "pk": {MARKER: "?"}},
            "args[0][1].pk: unknown type tag '?'",
        ),
        ({"k": {1, 2}}, "args[0][1]['k']: 'set' is not JSON data"),
    ],
)
def test_decode_rejects_malformed_values_with_their_path(value: Any, expected: str) -> None:
    with pytest.raises(ValueError, match=re.escape(expected)) as exc:
        decode_call({"args": [[0, value]], "kwargs": {}})
    assert isinstance(exc.value, MalformedPayload)
    assert isinstance(exc.value, ZQueueError)


def test_decode_reports_kwargs_paths() -> None:
    data = {"args": [], "kwargs": {"when": {MARKER: "date", "v": "nope"}}}
    with pytest.raises(MalformedPayload, match=r"^kwargs\['when'\]: malformed 'date' value"):
        decode_call(data)


def test_decode_accepts_encode_output_without_json() -> None:
    args = ((1, 2), {MARKER: [date(2024, 1, 1)]}, Decimal("0.1"))
    back, kwargs = decode_call(encode_call(args, {"u": UID}))
    assert_identical(back, args)
    assert_identical(kwargs, {"u": UID})


# --- property: anything supported round-trips exactly through strict JSON ------------------

_offsets = st.integers(-86399, 86399).map(lambda s: timezone(timedelta(seconds=s)))
_zones = st.none() | st.timezones() | _offsets
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_tagged = (
    st.datetimes(timezones=_zones)
    | st.dates()
    | st.times(timezones=_zones)
    | st.timedeltas()
    | st.decimals()
    | st.uuids()
)
_keys = st.sampled_from([MARKER, "v", "tz", "fold", "pk", "args"]) | st.text(max_size=8)
_values = st.recursive(
    _scalars | _tagged,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(_keys, inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(
    args=st.lists(_values, max_size=4).map(tuple),
    kwargs=st.dictionaries(st.text(max_size=8), _values, max_size=4),
)
def test_property_round_trip_through_strict_json(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    encoded = encode_call(args, kwargs)
    assert json_only(encoded)
    wire = json.dumps(encoded, allow_nan=False)
    args_back, kwargs_back = decode_call(json.loads(wire))
    assert_identical(args_back, args)
    assert_identical(kwargs_back, kwargs)
