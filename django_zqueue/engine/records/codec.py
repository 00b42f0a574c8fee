"""A job's stored record, read in Python: the two layouts of ``lua/_record.lua``.

- **compact**: one field of the ``meta`` hash holds a MessagePack map of the record's
  fields (as Redis's ``cmsgpack`` writes it) followed by the job's body, raw; or, for a
  body with a task's shape, the body's parts as fields ``T``, ``A`` and ``K`` and
  nothing after the map (``lua/_record.lua``, "Body parts");
- **JSON** (jobs written before the compact layout): the field holds a JSON object and
  the body is in the ``body`` hash.

The first byte tells them apart: ``{`` is JSON, a compact record starts with a MessagePack
map header. :func:`read_fields` gives the fields of either, :func:`split_record` the fields
and the body (None for the JSON layout: read the ``body`` hash). Only the MessagePack that
``cmsgpack`` writes is read: nil, booleans, integers, floats, strings, arrays and maps.
"""

from __future__ import annotations

import json
import struct
from typing import Any

__all__ = [
    "RecordError",
    "loads",
    "pack_record",
    "pack_value",
    "read_fields",
    "split_kept",
    "split_record",
    "unpack_one",
]

_raw_decode = json.JSONDecoder().raw_decode


def loads(raw: bytes) -> Any:
    """``json.loads(raw)``, and quicker for the usual record, a JSON object in UTF-8 with
    nothing around it (two per claimed job): without the encoding detection
    ``json.loads`` does for bytes (a first byte ``{`` and a second one not 0 can only be
    UTF-8 to it) and its two searches for white space. Anything else, and any error, is
    ``json.loads``'s."""
    if raw[:1] == b"{" and raw[1:2] != b"\x00":
        try:
            text = raw.decode("utf-8", "surrogatepass")
            value, end = _raw_decode(text)
            if end == len(text):
                return value
        except ValueError:
            pass
    return json.loads(raw)


class RecordError(ValueError):
    """A stored record that is neither layout (truncated, or not a map)."""


_FIXED: dict[int, struct.Struct] = {  # first byte -> the value's struct
    0xCC: struct.Struct(">B"),
    0xCD: struct.Struct(">H"),
    0xCE: struct.Struct(">I"),
    0xCF: struct.Struct(">Q"),
    0xD0: struct.Struct(">b"),
    0xD1: struct.Struct(">h"),
    0xD2: struct.Struct(">i"),
    0xD3: struct.Struct(">q"),
    0xCA: struct.Struct(">f"),
    0xCB: struct.Struct(">d"),
}
_STR_LEN = {0xD9: struct.Struct(">B"), 0xDA: struct.Struct(">H"), 0xDB: struct.Struct(">I")}
_BIN_LEN = {0xC4: struct.Struct(">B"), 0xC5: struct.Struct(">H"), 0xC6: struct.Struct(">I")}
_ARR_LEN = {0xDC: struct.Struct(">H"), 0xDD: struct.Struct(">I")}
_MAP_LEN = {0xDE: struct.Struct(">H"), 0xDF: struct.Struct(">I")}
_CONST = {0xC0: None, 0xC2: False, 0xC3: True}


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def unpack_one(buf: bytes, at: int = 0) -> tuple[Any, int]:
    """The value at ``buf[at]`` and the offset after it; :class:`RecordError` when ``buf``
    ends inside it or holds a type ``cmsgpack`` never writes."""
    try:
        b = buf[at]
        at += 1
        if b <= 0x7F:
            return b, at
        if b >= 0xE0:
            return b - 0x100, at
        if 0xA0 <= b <= 0xBF:
            n = b & 0x1F
        elif 0x80 <= b <= 0x8F:
            return _map(buf, at, b & 0x0F)
        elif 0x90 <= b <= 0x9F:
            return _array(buf, at, b & 0x0F)
        elif b in _CONST:
            return _CONST[b], at
        elif b in _FIXED:
            s = _FIXED[b]
            return s.unpack_from(buf, at)[0], at + s.size
        elif b in _STR_LEN or b in _BIN_LEN:
            s = _STR_LEN.get(b) or _BIN_LEN[b]
            n = s.unpack_from(buf, at)[0]
            at += s.size
            if b in _BIN_LEN:
                if at + n > len(buf):
                    raise RecordError("a record ends inside a value")
                return buf[at : at + n], at + n
        elif b in _MAP_LEN:
            s = _MAP_LEN[b]
            return _map(buf, at + s.size, s.unpack_from(buf, at)[0])
        elif b in _ARR_LEN:
            s = _ARR_LEN[b]
            return _array(buf, at + s.size, s.unpack_from(buf, at)[0])
        else:
            raise RecordError(f"a record holds MessagePack type 0x{b:02x}")
    except (IndexError, struct.error) as exc:
        raise RecordError("a record ends inside a value") from exc
    if at + n > len(buf):
        raise RecordError("a record ends inside a value")
    return _text(buf[at : at + n]), at + n


def _map(buf: bytes, at: int, n: int) -> tuple[dict[Any, Any], int]:
    out: dict[Any, Any] = {}
    for _ in range(n):
        key, at = unpack_one(buf, at)
        value, at = unpack_one(buf, at)
        if isinstance(key, (dict, list)):
            raise RecordError("a record's map has a key that is not a scalar")
        out[key] = value
    return out, at


def _array(buf: bytes, at: int, n: int) -> tuple[list[Any], int]:
    out = []
    for _ in range(n):
        value, at = unpack_one(buf, at)
        out.append(value)
    return out, at


def split_record(raw: bytes | str) -> tuple[dict[str, Any], bytes | None]:
    """A stored record's fields and its body (None: the JSON layout, whose body is in the
    ``body`` hash). :class:`RecordError` (a ``ValueError``) when it is neither layout."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    if raw[:1] == b"{":
        fields = loads(raw)
        if not isinstance(fields, dict):
            raise RecordError("a JSON record is not an object")
        return fields, None
    if not raw:
        raise RecordError("a record is empty")
    fields, end = unpack_one(raw)
    if not isinstance(fields, dict):
        # cmsgpack writes an empty table as an empty array: a record without fields
        if fields == []:
            return {}, raw[end:]
        raise RecordError("a record is not a map")
    if "A" in fields or "T" in fields:
        body = _parts_body(raw)
        if body is not None:
            return _without_parts(fields), body
    return fields, raw[end:]  # (parts that are not texts: the record is corrupt, as in Lua)


#: the text around a task body's parts (``lua/_record.lua``, "Body parts")
_BODY_TASK, _BODY_ARGS, _BODY_KWARGS = b'{"task":', b',"args":', b',"kwargs":'
_PARTS = ("T", "A", "K")


def _without_parts(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k not in _PARTS}


def _parts_body(raw: bytes) -> bytes | None:
    """The body a compact record keeps as its parts T, A and K: their bytes as stored
    (not decoded: a body is given back byte for byte), between the fixed text; None when
    they are not all texts, or T or A is missing."""
    parts: dict[str, bytes] = {}
    value: Any
    n, at = _map_size(raw)
    for _ in range(n):
        key, at = unpack_one(raw, at)
        if key in _PARTS:
            value, at = _raw_str(raw, at)
            if value is None:
                return None
            parts[key] = value
        else:
            _, at = unpack_one(raw, at)
    if "T" not in parts or "A" not in parts:
        return None
    kwargs = parts.get("K", b"{}")
    return b"".join((_BODY_TASK, parts["T"], _BODY_ARGS, parts["A"], _BODY_KWARGS, kwargs, b"}"))


def _map_size(raw: bytes) -> tuple[int, int]:
    """The number of entries of the map ``raw`` starts with, and where the first is."""
    b = raw[0]
    if 0x80 <= b <= 0x8F:
        return b & 0x0F, 1
    if b in _MAP_LEN:
        s = _MAP_LEN[b]
        return s.unpack_from(raw, 1)[0], 1 + s.size
    raise RecordError("a record is not a map")


def _raw_str(buf: bytes, at: int) -> tuple[bytes | None, int]:
    """The bytes of the MessagePack str (or bin) at ``buf[at]``, undecoded (None, and
    the offset after it, for a value of another type)."""
    try:
        b = buf[at]
        at += 1
        if 0xA0 <= b <= 0xBF:
            n = b & 0x1F
        elif b in _STR_LEN or b in _BIN_LEN:
            s = _STR_LEN.get(b) or _BIN_LEN[b]
            n = s.unpack_from(buf, at)[0]
            at += s.size
        else:
            _, end = unpack_one(buf, at - 1)
            return None, end
    except (IndexError, struct.error) as exc:
        raise RecordError("a record ends inside a value") from exc
    if at + n > len(buf):
        raise RecordError("a record ends inside a value")
    return buf[at : at + n], at + n


def split_kept(raw: bytes | str) -> tuple[dict[str, Any], bytes]:
    """A record kept in the history of finished jobs (``lua/_history.lua``): a map of how
    the job ended (``fa``, ``rt``, ``was``), then its record in the compact layout. Its
    fields (the record's, and the end's over them) and its body; :class:`RecordError` when
    it is not that. Also reads the two maps alone (``info.lua`` sends no body)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    ends, at = unpack_one(raw) if raw else (None, 0)
    if not isinstance(ends, dict):
        raise RecordError("a kept record does not start with a map")
    if at == len(raw):
        return dict(ends), b""
    fields, body = split_record(raw[at:])
    return {**fields, **ends}, body or b""


def read_fields(raw: bytes | str) -> dict[str, Any]:
    """A stored record's fields, either layout (the body, if it holds one, is skipped):
    ``split_record(raw)[0]``, without building the body (the worker reads one record per
    claimed job, whose body came apart). Texts and small integers, what a record's fields
    almost always are, are read inline; any other value by :func:`unpack_one`; body parts
    are skipped undecoded. Whatever this does not read quickly goes to ``split_record``."""
    if isinstance(raw, str) or raw[:1] not in _FIXMAP:
        return split_record(raw)[0]
    out: dict[Any, Any] = {}
    parts = 0
    at, end = 1, len(raw)
    try:
        for _ in range(raw[0] & 0x0F):
            b = raw[at]
            if b == 0xA1:  # a one-byte key, what a record's keys mostly are
                key = _ONE_BYTE[raw[at + 1]]
                at += 2
            elif 0xA0 <= b <= 0xBF:
                n = at + 1 + (b & 0x1F)
                key = raw[at + 1 : n].decode("utf-8", "replace")
                at = n
            else:
                return split_record(raw)[0]  # a key that is not a short text
            b = raw[at]
            if key in _PARTS:
                part, at = _raw_str(raw, at)
                if part is None:
                    return split_record(raw)[0]  # parts that are not texts: corrupt
                parts |= _PART_BIT[key]
                continue
            if b <= 0x7F:
                out[key] = b
                at += 1
            elif 0xA0 <= b <= 0xBF:
                n = at + 1 + (b & 0x1F)
                if n > end:
                    raise RecordError("a record ends inside a value")
                out[key] = raw[at + 1 : n].decode("utf-8", "replace")
                at = n
            elif b == 0xCF:  # uint 64: a time in ms
                n = at + 9
                if n > end:
                    raise RecordError("a record ends inside a value")
                out[key] = int.from_bytes(raw[at + 1 : n], "big")
                at = n
            else:
                out[key], at = unpack_one(raw, at)
    except IndexError as exc:
        raise RecordError("a record ends inside a value") from exc
    if at > end:
        raise RecordError("a record ends inside a value")
    if parts and parts & 3 != 3:  # parts without both T and A are not parts
        return split_record(raw)[0]
    return out


_FIXMAP = frozenset(bytes([b]) for b in range(0x81, 0x90))
#: the text of each one-byte str, as _text decodes it
_ONE_BYTE = tuple(bytes([b]).decode("utf-8", "replace") for b in range(256))
_PART_BIT = {"T": 1, "A": 2, "K": 4}


def _pack(value: Any, out: list[bytes]) -> None:
    if value is None:
        out.append(b"\xc0")
    elif value is True or value is False:
        out.append(b"\xc3" if value else b"\xc2")
    elif isinstance(value, int):
        if 0 <= value < 0x80:
            out.append(bytes((value,)))
        elif -0x20 <= value < 0:
            out.append(bytes((value & 0xFF,)))
        elif 0 <= value < 1 << 64:
            out.append(b"\xcf" + value.to_bytes(8, "big"))
        else:
            out.append(b"\xd3" + value.to_bytes(8, "big", signed=True))
    elif isinstance(value, float):
        out.append(b"\xcb" + struct.pack(">d", value))
    elif isinstance(value, (str, bytes)):
        data = value.encode("utf-8") if isinstance(value, str) else value
        n = len(data)
        if n < 32:
            out.append(bytes((0xA0 | n,)))
        elif n < 1 << 8:
            out.append(b"\xd9" + bytes((n,)))
        elif n < 1 << 16:
            out.append(b"\xda" + n.to_bytes(2, "big"))
        else:
            out.append(b"\xdb" + n.to_bytes(4, "big"))
        out.append(data)
    elif isinstance(value, (list, tuple)):
        n = len(value)
        out.append(bytes((0x90 | n,)) if n < 16 else b"\xdc" + n.to_bytes(2, "big"))
        for item in value:
            _pack(item, out)
    elif isinstance(value, dict):
        n = len(value)
        out.append(bytes((0x80 | n,)) if n < 16 else b"\xde" + n.to_bytes(2, "big"))
        for key, item in value.items():
            _pack(key, out)
            _pack(item, out)
    else:
        raise TypeError(f"a record holds no {type(value).__name__}")


def pack_value(value: Any) -> bytes:
    """``value`` as MessagePack (nil, bool, int, float, str, bytes, list, dict): what a
    repair or a test writes into a record; the scripts write records themselves."""
    out: list[bytes] = []
    _pack(value, out)
    return b"".join(out)


def pack_record(fields: dict[str, Any], body: bytes) -> bytes:
    """A compact record: ``fields`` as a MessagePack map, then ``body`` (kept whole: the
    scripts split a task's body into parts when they write it)."""
    return pack_value(fields) + body
