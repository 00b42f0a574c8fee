"""JSON encoding of task call arguments. Nothing is ever pickled.

:func:`encode_call` turns ``(args, kwargs)`` into ``{"args": [...], "kwargs": {...}}``,
made only of JSON values (``json.dumps(..., allow_nan=False)`` accepts it);
:func:`decode_call` is its exact inverse.

Wire format. ``None``, bools, ints, finite floats, strs, lists and dicts with str keys are
written as themselves. Other supported values become a dict with the marker key
``"__zq__"`` naming the type::

    tuple        {"__zq__": "tuple", "v": [<items>]}
    datetime     {"__zq__": "datetime", "v": "2024-05-01T12:00:00.000001+02:00"}
    date         {"__zq__": "date", "v": "2024-05-01"}
    time         {"__zq__": "time", "v": "12:00:00.000001"}
    timedelta    {"__zq__": "timedelta", "v": [<days>, <seconds>, <microseconds>]}
    Decimal      {"__zq__": "decimal", "v": "1.50"}
    UUID         {"__zq__": "uuid", "v": "12345678-1234-5678-1234-567812345678"}
    model        {"__zq__": "model", "app_label": "demo", "model_name": "article", "pk": <pk>}
    dict holding the marker key
                 {"__zq__": "dict", "v": {<entries, "__zq__" included>}}

A datetime or time in a ``zoneinfo.ZoneInfo`` zone also carries ``"tz": "<key>"`` (its
wall-clock time is kept, even in a DST gap), and one with ``fold=1`` carries ``"fold": 1``.
Any other tzinfo is sent as its fixed UTC offset, in whole seconds (offsets with a fraction
of a second are refused). ``"v"`` of an aware datetime always holds its UTC offset, so
other readers can place the instant without knowing the zone.

Model instances are sent by reference: decoding fetches the row again with
``_default_manager.get(pk=pk)`` (the pk is itself encoded, so UUID pks work) and raises
:class:`ModelInstanceMissing` if it is gone.

Subclasses of supported types are sent as their base type: an ``IntEnum`` or
``TextChoices`` member arrives as a plain int or str, a namedtuple as a tuple, an
``OrderedDict`` as a dict. Anything else (sets, bytes, arbitrary objects, QuerySets…)
is refused at encode time with a :class:`UnsupportedArgument` (a ``TypeError``) naming
where the value sits, e.g. ``kwargs['user'][2]``.

Values are checked by exact type first, so plain JSON data costs one set lookup per value.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, NoReturn, TypeAlias, TypedDict, TypeVar, cast
from uuid import UUID
from zoneinfo import ZoneInfo

from django.apps import apps
from django.db import models

from ..exceptions import InvalidArgument, ZQueueError

__all__ = [
    "MARKER",
    "EncodedCall",
    "MalformedPayload",
    "ModelInstanceMissing",
    "UnsupportedArgument",
    "decode_call",
    "encode_call",
]

_Clock = TypeVar("_Clock", datetime, time)

#: data as JSON holds it: what encode_call returns and decode_call reads
JSON: TypeAlias = "bool | int | float | str | list[JSON] | dict[str, JSON] | None"
Tagged: TypeAlias = dict[str, JSON]  # a JSON object: a tagged value on the wire

#: the key that marks a dict on the wire as a tagged value
MARKER = "__zq__"


class UnsupportedArgument(ZQueueError, TypeError):
    """A task argument cannot be encoded. ``path`` says where it sits (``"args[1]['x']"``)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:  # survives pickling (multiprocessing, logging)
        return (type(self), (self.path, self.message))


class MalformedPayload(ZQueueError, ValueError):
    """Data given to :func:`decode_call` was not written by :func:`encode_call`, or it names
    a model that is no longer installed or a time zone this machine does not know."""


class ModelInstanceMissing(ZQueueError, LookupError):
    """A model instance sent by reference no longer exists (deleted since it was sent)."""

    def __init__(self, model: str, pk: Any) -> None:
        self.model = model  # "app_label.ModelName"
        self.pk = pk
        super().__init__(
            f"{model} with pk={pk!r} no longer exists (deleted after the task was enqueued?)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.model, self.pk))


class EncodedCall(TypedDict):
    args: list[JSON]
    kwargs: dict[str, JSON]


class _Failure(Exception):
    """Internal: carries an error up to encode_call/decode_call, collecting its path.

    ``node`` is the object the next enclosing container looks for among its items (by
    identity) to add its own step; building paths only on failure keeps the happy path free.
    """

    def __init__(self, node: object, message: str, error: type[Exception]) -> None:
        self.node = node
        self.message = message
        self.error = error
        self.steps: list[str] = []  # innermost first

    def within(self, container: object, step: str) -> None:
        self.steps.append(step)
        self.node = container

    def at_index(self, items: Iterable[Any]) -> None:
        for i, item in enumerate(items):
            if item is self.node:
                self.within(items, f"[{i}]")
                return
        self.within(items, "[?]")  # not reached: the failing item is always among them

    def to_error(self, root: str) -> Exception:
        path = root + "".join(reversed(self.steps))
        if self.error is UnsupportedArgument:
            return UnsupportedArgument(path, self.message)
        return self.error(f"{path}: {self.message}")


# Exact types written as themselves. Containers test items against this inline, so a plain
# JSON scalar never costs a function call.
_SCALARS = frozenset({str, int, bool, type(None)})
_JSON_SCALARS = _SCALARS | {float}

_ACCEPTED = (
    "pass JSON data, model instances (sent by reference), datetimes, dates, Decimals or UUIDs"
)


# --- encoding ----------------------------------------------------------------------------


def _encode(value: object) -> JSON:
    encoder = _ENCODERS.get(type(value))
    if encoder is None:
        encoder = _subclass_encoder(type(value))
    return encoder(value)


def _subclass_encoder(cls: type) -> Callable[[Any], JSON]:
    for base in cls.__mro__[1:]:
        encoder = _BASE_ENCODERS.get(base)
        if encoder is not None:
            return encoder
    return _unsupported


def _same(value: JSON) -> JSON:
    return value


def _enc_float(value: float) -> float:
    if math.isfinite(value):
        return value
    _non_finite(value)


def _non_finite(value: float) -> NoReturn:
    raise _Failure(
        value,
        f"float {value!r} cannot be sent to a task; JSON has no NaN or infinity",
        InvalidArgument,
    )


def _enc_list(value: list[Any] | tuple[Any, ...]) -> list[JSON]:
    try:
        return [item if type(item) in _SCALARS else _encode(item) for item in value]
    except _Failure as failure:
        failure.at_index(value)
        raise


def _enc_entries(value: Mapping[Any, Any]) -> dict[str, JSON]:
    out: dict[str, JSON] = {}
    key: object = None
    try:
        for key, item in value.items():
            if type(key) is not str:
                if not isinstance(key, str):
                    raise _Failure(
                        value,
                        f"dict keys must be str, not {type(key).__name__!r} (key {key!r})",
                        UnsupportedArgument,
                    )
                key = str.__str__(key)
            out[key] = item if type(item) in _SCALARS else _encode(item)
    except _Failure as failure:
        if failure.node is not value:  # a key error is reported at the dict itself
            failure.within(value, f"[{key!r}]")
        raise
    return out


def _enc_dict(value: Mapping[Any, Any]) -> Tagged:
    out = _enc_entries(value)
    if MARKER in out:
        return {MARKER: "dict", "v": out}
    return out


def _enc_tuple(value: tuple[Any, ...]) -> Tagged:
    return {MARKER: "tuple", "v": _enc_list(value)}


def _enc_zone(value: datetime | time, out: Tagged) -> Tagged:
    """Add what isoformat() loses: the zone of a ZoneInfo value and ``fold``."""
    tz = value.tzinfo
    if tz is not None:
        if isinstance(tz, ZoneInfo) and tz.key is not None:
            out["tz"] = tz.key
        else:
            offset = value.utcoffset()
            if offset is None:
                problem = "has no fixed UTC offset"
            elif offset.microseconds:
                # fromisoformat() misreads some of them (+00:00:00.000001 comes back as UTC)
                problem = f"has a UTC offset with a fraction of a second ({offset!r})"
            else:
                problem = ""
            if problem:
                raise _Failure(
                    value,
                    f"{type(value).__name__} with tzinfo {tz!r} {problem} and cannot be sent "
                    "to a task",
                    UnsupportedArgument,
                )
    if value.fold:
        out["fold"] = 1
    return out


def _enc_datetime(value: datetime) -> Tagged:
    out: Tagged = {MARKER: "datetime", "v": value.isoformat()}
    tz = value.tzinfo
    if (tz is None or tz is UTC) and not value.fold:  # naive, or django.utils.timezone.now()
        return out
    return _enc_zone(value, out)


def _enc_time(value: time) -> Tagged:
    return _enc_zone(value, {MARKER: "time", "v": value.isoformat()})


def _enc_date(value: date) -> Tagged:
    return {MARKER: "date", "v": value.isoformat()}


def _enc_timedelta(value: timedelta) -> Tagged:
    return {MARKER: "timedelta", "v": [value.days, value.seconds, value.microseconds]}


def _enc_decimal(value: Decimal) -> Tagged:
    return {MARKER: "decimal", "v": str(value)}


def _enc_uuid(value: UUID) -> Tagged:
    return {MARKER: "uuid", "v": str(value)}


def _enc_model(value: models.Model) -> Tagged:
    meta = value._meta
    pk = value.pk
    if pk is None:
        raise _Failure(
            value,
            f"unsaved {meta.label} instance (pk is None) cannot be sent to a task by "
            "reference; save it first",
            UnsupportedArgument,
        )
    if type(pk) not in _SCALARS:
        try:
            pk = _encode(pk)
        except _Failure as failure:
            failure.within(value, ".pk")
            raise
    return {MARKER: "model", "app_label": meta.app_label, "model_name": meta.model_name, "pk": pk}


def _enc_str_subclass(value: str) -> str:
    return str.__str__(value)


def _enc_int_subclass(value: int) -> int:
    return int.__int__(value)


def _enc_float_subclass(value: float) -> float:
    if math.isfinite(value):
        return float.__float__(value)
    _non_finite(value)


_HINTS: dict[type, str] = {
    set: "convert it to a list",
    frozenset: "convert it to a list",
    bytes: "decode it to str, or base64-encode it",
    bytearray: "decode it to str, or base64-encode it",
}


def _unsupported(value: object) -> NoReturn:
    hint = _HINTS.get(type(value))
    if hint is None and isinstance(value, models.QuerySet):
        hint = "pass list(queryset) (instances are sent by reference) or a list of pks"
    raise _Failure(
        value,
        f"objects of type {type(value).__name__!r} cannot be sent to a task; {_ACCEPTED}"
        + (f" ({hint})" if hint else ""),
        UnsupportedArgument,
    )


_ENCODERS: dict[type, Callable[[Any], JSON]] = {
    str: _same,
    int: _same,
    bool: _same,
    type(None): _same,
    float: _enc_float,
    list: _enc_list,
    dict: _enc_dict,
    tuple: _enc_tuple,
    datetime: _enc_datetime,
    date: _enc_date,
    time: _enc_time,
    timedelta: _enc_timedelta,
    Decimal: _enc_decimal,
    UUID: _enc_uuid,
}

# Looked up along the MRO of a type missing from _ENCODERS. The MRO puts datetime before
# date, so a datetime subclass (freezegun's FakeDatetime, say) stays a datetime.
_BASE_ENCODERS: dict[type, Callable[[Any], JSON]] = {
    **_ENCODERS,
    str: _enc_str_subclass,
    int: _enc_int_subclass,
    float: _enc_float_subclass,
    models.Model: _enc_model,
}


def encode_call(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> EncodedCall:
    """Encode a task call's arguments into JSON-safe data (see the module docstring).

    Raises :class:`UnsupportedArgument` (a ``TypeError``) for a value that cannot be sent,
    and :class:`~django_zqueue.exceptions.InvalidArgument` (a ``ValueError``) for NaN or
    infinite floats and for arguments nested too deeply (or holding a reference cycle).
    Either message starts with the path of the value, such as ``kwargs['user'][2]``.
    """
    if type(args) is not tuple and not isinstance(args, tuple | list):
        raise UnsupportedArgument("args", f"must be a tuple, not {type(args).__name__!r}")
    if type(kwargs) is not dict and not isinstance(kwargs, Mapping):
        raise UnsupportedArgument("kwargs", f"must be a dict, not {type(kwargs).__name__!r}")
    root = "args"
    try:
        encoded_args = _enc_list(args)
        root = "kwargs"
        encoded_kwargs = _enc_entries(kwargs)
    except _Failure as failure:
        raise failure.to_error(root) from None
    except RecursionError:
        raise InvalidArgument(
            f"{root}: arguments are nested too deeply or contain a reference cycle"
        ) from None
    return {"args": encoded_args, "kwargs": encoded_kwargs}


# --- decoding ----------------------------------------------------------------------------


def _decode(value: JSON) -> object:
    cls = type(value)
    if cls is dict:  # exactly dict and list, as JSON gives them (not subclasses)
        obj = cast(Tagged, value)
        if MARKER in obj:
            return _dec_tagged(obj)
        return _dec_entries(obj)
    if cls is list:
        return _dec_list(cast(list[JSON], value))
    if cls in _JSON_SCALARS:
        return value
    raise _Failure(value, f"{cls.__name__!r} is not JSON data", MalformedPayload)


def _dec_list(value: list[JSON]) -> list[object]:
    try:
        return [item if type(item) in _JSON_SCALARS else _decode(item) for item in value]
    except _Failure as failure:
        failure.at_index(value)
        raise


def _dec_entries(value: dict[str, JSON]) -> dict[str, object]:
    try:
        return {
            key: item if type(item) in _JSON_SCALARS else _decode(item)
            for key, item in value.items()
        }
    except _Failure as failure:
        for key, item in value.items():
            if item is failure.node:
                failure.within(value, f"[{key!r}]")
                break
        raise


def _dec_tagged(value: Tagged) -> object:
    tag = value[MARKER]
    decoder = _DECODERS.get(tag) if type(tag) is str else None
    if decoder is None:
        raise _Failure(
            value,
            f"unknown type tag {tag!r} (written by a newer django_zqueue?)",
            MalformedPayload,
        )
    try:
        return decoder(value)
    except _Failure as failure:
        failure.node = value  # steps taken inside a tagged value belong to it
        raise


def _malformed(value: Tagged, detail: str) -> _Failure:
    return _Failure(
        value,
        f"malformed {value[MARKER]!r} value {reprlib.repr(value)}: {detail}",
        MalformedPayload,
    )


def _dec_tuple(value: Tagged) -> tuple[object, ...]:
    items = value.get("v")
    if type(items) is not list:
        raise _malformed(value, "'v' must be a list")
    return tuple(_dec_list(items))


def _dec_escaped_dict(value: Tagged) -> dict[str, object]:
    entries = value.get("v")
    if type(entries) is not dict:
        raise _malformed(value, "'v' must be a dict")
    return _dec_entries(entries)


def _dec_model(value: Tagged) -> models.Model:
    app_label = value.get("app_label")
    model_name = value.get("model_name")
    if type(app_label) is not str or type(model_name) is not str or "pk" not in value:
        raise _malformed(value, "'app_label', 'model_name' (strs) and 'pk' are required")
    try:
        model = apps.get_model(app_label, model_name)
    except LookupError:
        raise _Failure(
            value, f"model '{app_label}.{model_name}' is not installed", MalformedPayload
        ) from None
    pk: object = value["pk"]
    if type(pk) not in _JSON_SCALARS:
        try:
            pk = _decode(value["pk"])
        except _Failure as failure:
            failure.within(value, ".pk")
            raise
    try:
        instance: models.Model = model._default_manager.get(pk=pk)
    except model.DoesNotExist:
        raise ModelInstanceMissing(model._meta.label, pk) from None
    return instance


def _text(value: Tagged) -> str:
    text = value["v"]
    if type(text) is not str:
        raise TypeError("'v' must be a str")
    return text


def _with_zone(result: _Clock, value: Tagged) -> _Clock:
    if len(value) == 2:  # only the marker and "v"
        return result
    key = value.get("tz")
    if key is not None:
        if type(key) is not str:
            raise TypeError("'tz' must be a str")
        result = result.replace(tzinfo=ZoneInfo(key))
    fold = value.get("fold", 0)
    if fold:
        if not isinstance(fold, int):
            raise TypeError("'fold' must be 0 or 1")
        result = result.replace(fold=fold)  # ValueError unless 0 or 1
    return result


def _dec_datetime(value: Tagged) -> datetime:
    return _with_zone(datetime.fromisoformat(_text(value)), value)


def _dec_time(value: Tagged) -> time:
    return _with_zone(time.fromisoformat(_text(value)), value)


def _dec_date(value: Tagged) -> date:
    return date.fromisoformat(_text(value))


def _dec_timedelta(value: Tagged) -> timedelta:
    parts = value["v"]
    if not isinstance(parts, list) or len(parts) != 3:
        raise TypeError("'v' must be three ints")
    if not all(type(x) is int for x in parts):
        raise TypeError("'v' must be three ints")
    days, seconds, microseconds = cast(list[int], parts)
    return timedelta(days=days, seconds=seconds, microseconds=microseconds)


def _dec_decimal(value: Tagged) -> Decimal:
    return Decimal(_text(value))


def _dec_uuid(value: Tagged) -> UUID:
    return UUID(_text(value))


def _leaf(parse: Callable[[Tagged], object]) -> Callable[[Tagged], object]:
    """Turn the errors of a leaf parser into a MalformedPayload failure.

    Only leaves are wrapped: a nested model lookup's own errors must pass through untouched.
    """

    def decode(value: Tagged) -> object:
        try:
            return parse(value)
        except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
            raise _malformed(value, f"{type(exc).__name__}: {exc}") from None

    return decode


_DECODERS: dict[str, Callable[[Tagged], object]] = {
    "tuple": _dec_tuple,
    "dict": _dec_escaped_dict,
    "model": _dec_model,
    "datetime": _leaf(_dec_datetime),
    "date": _leaf(_dec_date),
    "time": _leaf(_dec_time),
    "timedelta": _leaf(_dec_timedelta),
    "decimal": _leaf(_dec_decimal),
    "uuid": _leaf(_dec_uuid),
}


def decode_call(data: object) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Rebuild ``(args, kwargs)`` from the output of :func:`encode_call` (or its JSON).

    Model instances are fetched from the database, one query each. Raises
    :class:`ModelInstanceMissing` (a ``LookupError``) if one was deleted, and
    :class:`MalformedPayload` (a ``ValueError``) for data :func:`encode_call` cannot have
    written or naming a model that is not installed.
    """
    if (
        type(data) is not dict
        or type(data.get("args")) is not list
        or type(data.get("kwargs")) is not dict
    ):
        raise MalformedPayload(
            f"expected {{'args': [...], 'kwargs': {{...}}}}, got {reprlib.repr(data)}"
        )
    root = "args"
    try:
        args = tuple(_dec_list(data["args"])) if data["args"] else ()
        root = "kwargs"
        kwargs = _dec_entries(data["kwargs"]) if data["kwargs"] else {}
    except _Failure as failure:
        raise failure.to_error(root) from None
    except RecursionError:
        raise MalformedPayload(f"{root}: data is nested too deeply") from None
    return args, kwargs
