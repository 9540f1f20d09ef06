"""flwr's ``Message`` protobuf bytes written directly, for the messages of the hot path.

``message_to_proto(m).SerializeToString()`` first builds a tree of protobuf objects in Python
(one per metadata field, record, array and config value): on a small-model step that costs ~30 µs
per message, while the bytes themselves take ~1 µs. The schema of ``flwr/proto/message.proto`` and
``recorddict.proto`` is small and fixed, so this module writes the same bytes with the protobuf
wire rules (tag = field << 3 | wire type; varints; proto3 implicit presence: a scalar at its
default is omitted, a oneof member or a set sub-message is always written; fields in number order,
which is the order upb emits). ``encode`` returns None for anything outside the hot path (errors,
metric records, mixed lists, task ids, out-of-range integers): the caller then uses flwr's encoder.
``tests/unit/runtime/test_pbwire.py`` checks byte equality with flwr's encoder on generated messages.

The writer reads flwr's private attributes, so it is checked once per process against the installed
flwr (``path()``): a probe message covering every field it writes must give flwr's own bytes;
otherwise (a flwr release with another schema or layout) every message goes to flwr's encoder.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

from flwr.common import Array, ArrayRecord, ConfigRecord, Message, Metadata, RecordDict, serde

_DOUBLE = struct.Struct("<d")
_ZERO8 = bytes(8)
_CACHED = frozenset({bool, int})  # config values whose item bytes are cached (not floats: 0.0 == -0.0; not
# strings or bytes, which may be large)
_I64_MIN, _I64_MAX, _U64_MAX, _I32_MAX = -(2**63), 2**63 - 1, 2**64 - 1, 2**31 - 1


def _varint_slow(n: int) -> bytes:
    """Base-128 varint of 0 <= n < 2**64 (least significant group first)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [_varint_slow(n) for n in range(1 << 14)]  # one- and two-byte varints: lengths, ids, steps


def _varint(n: int) -> bytes:
    return _SMALL[n] if n < 16384 else _varint_slow(n)


def _tag(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _len_field(tag: bytes, body: bytes) -> bytes:
    """A length-delimited field (string, bytes, sub-message)."""
    return tag + _varint(len(body)) + body


# field tags of the schema (wire types: 0 varint, 1 fixed64, 2 length-delimited)
_M_METADATA, _M_CONTENT = _tag(1, 2), _tag(2, 2)
_MD = (_tag(1, 0), _tag(2, 2), _tag(3, 0), _tag(4, 0), _tag(5, 2), _tag(6, 2), _tag(7, 1), _tag(8, 2), _tag(9, 1))
_ITEM_KEY, _ITEM_ARRAYS, _ITEM_CONFIG = _tag(1, 2), _tag(2, 2), _tag(4, 2)  # RecordDict.Item
_ITEMS = _tag(1, 2)  # the repeated ``items`` of RecordDict / ArrayRecord / ConfigRecord
_AR_KEY, _AR_VALUE = _tag(1, 2), _tag(2, 2)  # ArrayRecord.Item
_A_DTYPE, _A_SHAPE, _A_STYPE, _A_DATA = _tag(1, 2), _tag(2, 2), _tag(3, 2), _tag(4, 2)  # Array
_CR_KEY, _CR_VALUE = _tag(1, 2), _tag(2, 2)  # ConfigRecord.Item
_V_DOUBLE, _V_SINT64, _V_BOOL, _V_STRING, _V_BYTES = _tag(1, 1), _tag(2, 0), _tag(4, 0), _tag(5, 2), _tag(6, 2)
_V_DOUBLE_LIST, _V_SINT_LIST, _V_BOOL_LIST, _V_STRING_LIST, _V_BYTES_LIST = (_tag(n, 2) for n in (21, 22, 24, 25, 26))
_VALS = _tag(1, 2)  # the repeated ``vals`` of a *List (packed for numbers, one field per string or bytes)


class _Unsupported(Exception):
    """A value this writer does not cover: flwr's encoder takes the message."""


def _text(tag: bytes, value: str) -> bytes:
    """A proto3 string field (omitted when empty)."""
    return _len_field(tag, value.encode()) if value else b""


_str = lru_cache(maxsize=4096)(_text)  # for strings that repeat: keys, kinds, round tags (not message ids)


def _uint(tag: bytes, value: int) -> bytes:
    if type(value) is not int or not 0 <= value <= _U64_MAX:
        raise _Unsupported
    return tag + _varint(value) if value else b""


def _double(tag: bytes, value: float) -> bytes:
    if type(value) is not float:
        raise _Unsupported
    data = _DOUBLE.pack(value)
    return tag + data if data != _ZERO8 else b""  # +0.0 is the default; -0.0 is written


def _metadata(md: Any) -> bytes:
    d = md.__dict__
    if d["_src_task_id"] is not None or d["_dst_task_id"] is not None:
        raise _Unsupported
    return b"".join((
        _uint(_MD[0], d["_run_id"]), _text(_MD[1], d["_message_id"]), _uint(_MD[2], d["_src_node_id"]),
        _uint(_MD[3], d["_dst_node_id"]), _text(_MD[4], d["_reply_to_message_id"]), _str(_MD[5], d["_group_id"]),
        _double(_MD[6], d["_ttl"]), _str(_MD[7], d["_message_type"]), _double(_MD[8], d["_created_at"]),
    ))


@lru_cache(maxsize=1024)
def _array_head(dtype: str, shape: tuple[int, ...], stype: str) -> bytes:
    """An Array's fields before its data (dtype, packed shape, stype)."""
    if not all(0 <= s <= _I32_MAX for s in shape):
        raise _Unsupported
    packed = b"".join(_varint(s) for s in shape)
    return _str(_A_DTYPE, dtype) + (_len_field(_A_SHAPE, packed) if packed else b"") + _str(_A_STYPE, stype)


def _array_item(key: str, a: Any) -> list[bytes]:
    """One ArrayRecord item as chunks (the data is not copied until the message is joined)."""
    d = a.__dict__
    data = d["data"]
    if type(data) is not bytes:
        raise _Unsupported
    shape = tuple(d["shape"])
    if not all(type(s) is int for s in shape):  # checked outside the cache: np.int64(2) == 2 hashes alike
        raise _Unsupported
    head = _array_head(d["dtype"], shape, d["stype"])
    array_len = len(head) + (len(_A_DATA) + len(_varint(len(data))) + len(data) if data else 0)
    item = _str(_AR_KEY, key) + _AR_VALUE + _varint(array_len) + head + (_A_DATA + _varint(len(data)) if data else b"")
    return [_ITEMS, _varint(len(item) + len(data)), item, data]


@lru_cache(maxsize=4096, typed=True)
def _cached_config_item(key: str, v: bool | int) -> bytes:
    return _config_item(key, v)


def _config_item(key: str, v: Any) -> bytes:
    """One ConfigRecord item: key and a ConfigRecordValue (a oneof member: written even at its default)."""
    kind = type(v)
    if kind is bool:
        value = _V_BOOL + (b"\x01" if v else b"\x00")
    elif kind is int:
        if not _I64_MIN <= v <= _I64_MAX:
            raise _Unsupported  # flwr stores big unsigned ints as uint64
        value = _V_SINT64 + _varint((v << 1) ^ (v >> 63))  # zigzag
    elif kind is float:
        value = _V_DOUBLE + _DOUBLE.pack(v)
    elif kind is str:
        value = _len_field(_V_STRING, v.encode())
    elif kind is bytes:
        value = _len_field(_V_BYTES, v)
    elif kind is list:
        value = _list_value(v)
    else:
        raise _Unsupported
    return _len_field(_ITEMS, _str(_CR_KEY, key) + _len_field(_CR_VALUE, value))


def _list_value(v: list[Any]) -> bytes:
    """A list ConfigRecordValue as flwr picks it: the first of bool, int, float, str, bytes that every
    element is (an empty list is a BoolList); mixed lists and uint64-sized ints go to flwr's encoder."""
    kinds = {type(x) for x in v}
    if not v or kinds == {bool}:
        return _len_field(_V_BOOL_LIST, _len_field(_VALS, bytes(v)) if v else b"")
    if kinds == {int}:
        if not all(_I64_MIN <= x <= _I64_MAX for x in v):
            raise _Unsupported
        return _len_field(_V_SINT_LIST, _len_field(_VALS, b"".join(_varint((x << 1) ^ (x >> 63)) for x in v)))
    if kinds == {float}:
        return _len_field(_V_DOUBLE_LIST, _len_field(_VALS, b"".join(map(_DOUBLE.pack, v))))
    if kinds == {str}:
        return _len_field(_V_STRING_LIST, b"".join(_len_field(_VALS, x.encode()) for x in v))
    if kinds == {bytes}:
        return _len_field(_V_BYTES_LIST, b"".join(_len_field(_VALS, x) for x in v))
    raise _Unsupported


def _record_item(key: str, rec: Any) -> list[bytes]:
    """One RecordDict item as chunks."""
    kind = type(rec)
    if kind is ArrayRecord:
        chunks = [c for k, a in rec.__dict__["_data"].items() for c in _array_item(k, a)]
        tag = _ITEM_ARRAYS
    elif kind is ConfigRecord:
        chunks = [_cached_config_item(k, v) if type(v) in _CACHED else _config_item(k, v)
                  for k, v in rec.__dict__["_data"].items()]
        tag = _ITEM_CONFIG
    else:
        raise _Unsupported  # metric records (control plane) and subclasses
    size = sum(map(len, chunks))
    head = _str(_ITEM_KEY, key) + tag + _varint(size)
    return [_ITEMS, _varint(len(head) + size), head, *chunks]


def encode(message: Message) -> bytes | None:
    """The bytes of ``flwr.common.serde.message_to_proto(message).SerializeToString()``, or None
    when the message holds something this writer does not cover (use flwr's encoder then)."""
    if _PATH[0] != DIRECT and path() != DIRECT:
        return None
    return _encode(message)


def _encode(message: Message) -> bytes | None:
    d = message.__dict__
    if d["_error"] is not None or d["_content"] is None:
        return None
    try:
        chunks = [c for k, r in d["_content"].__dict__["_data"].items() for c in _record_item(k, r)]
        md = _metadata(d["_metadata"])
    except (_Unsupported, UnicodeEncodeError):
        return None
    return b"".join([_M_METADATA, _varint(len(md)), md, _M_CONTENT, _varint(sum(map(len, chunks))), *chunks])


DIRECT, FLWR = "direct", "flwr"  # the two encoder paths ``path()`` reports
_PATH = [""]  # the checked path of this process ("" until the first encode)


def _probe() -> Message:
    """A message through flwr's public constructors with every field this writer emits set."""
    from flwr.app.message.message import make_message

    md = Metadata(7, "m-1", 3, 2**32 - 1, "r-0", "train:1:2", 12.5, 3600.0, "train.probe")  # any kind: not a vocabulary one
    arrays = ArrayRecord({"x": Array(dtype="float32", shape=(2, 3), stype="raw", data=bytes(range(24)))})
    config = ConfigRecord({"b": True, "i": -5, "f": -0.0, "s": "é", "y": b"\x00\x01", "li": [3, -300], "lf": [0.5],
                           "lb": [True, False], "ls": ["é", ""], "ly": [b"\x00", b""], "le": []})
    return make_message(md, RecordDict({"emb": arrays, "step": config}))


def path() -> str:
    """Which encoder this process uses with the installed flwr: ``"direct"`` (this writer) when
    its bytes of a probe message equal ``serde.message_to_proto(...).SerializeToString()``,
    else ``"flwr"`` (flwr's encoder for every message). Checked once, then cached."""
    if not _PATH[0]:
        try:
            message = _probe()
            ok = _encode(message) == serde.message_to_proto(message).SerializeToString()
        except Exception:  # another flwr layout (a renamed private attribute, a changed constructor)
            ok = False
        _PATH[0] = DIRECT if ok else FLWR
    return _PATH[0]
