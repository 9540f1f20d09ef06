"""The flwr record objects of the hot path, built without flwr's per-item re-validation.

flwr's ``Array`` / ``ArrayRecord`` / ``ConfigRecord`` / ``RecordDict`` constructors type-check every
key and value in Python, and ``ArrayRecord(array_dict)`` copies every ``Array`` it is given; on a
small-model step that is most of the serde cost. Here the values are already typed (they come from
a parsed protobuf whose schema fixes the types, or from ``vfl.runtime.message.to_array``), so the same
objects are built directly: the same classes with the same attributes as flwr's constructors leave
(``tests/unit/runtime/test_fastrecords.py`` compares them with flwr's own ``message_from_proto`` on every
kind of wire). Encoding is flwr's own serde.

The objects are laid out as flwr's constructors leave them in the flwr releases tested; once per
process ``path()`` decodes a probe message both ways and, should another flwr lay them out
differently, every message is decoded by flwr's own ``message_from_proto`` instead.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flwr.app import metadata as _md
from flwr.app.message import arrayrecord as _ar
from flwr.app.message import configrecord as _cr
from flwr.app.message import recorddict as _rd
from flwr.app.message.message import make_message
from flwr.app.message.typeddict import TypedDict
from flwr.common import Array, ArrayRecord, ConfigRecord, Message, Metadata, RecordDict, serde
from flwr.common.serde_utils import (
    metadata_from_proto,
    record_value_dict_from_proto,
)


@lru_cache(maxsize=256)
def _valid_kind(kind: str) -> bool:
    """flwr's check of a message type (``Metadata.message_type``'s setter), cached per kind."""
    return _md.validate_legacy_message_type(kind) or _md.validate_message_type(kind)


def new_metadata(*, run_id: int, message_id: str, src_node_id: int, dst_node_id: int, reply_to_message_id: str,
                 group_id: str, created_at: float, ttl: float, message_type: str) -> Metadata:
    """``Metadata(...)`` as flwr's constructor leaves it (no task ids), its message-type check cached."""
    if not _valid_kind(message_type):
        Metadata(run_id, message_id, src_node_id, dst_node_id, reply_to_message_id, group_id, created_at, ttl,
                 message_type)  # raises flwr's ValueError naming the type
    md = object.__new__(Metadata)
    md.__dict__.update(_run_id=run_id, _message_id=message_id, _src_node_id=src_node_id, _dst_node_id=dst_node_id,
                       _src_task_id=None, _dst_task_id=None, _reply_to_message_id=reply_to_message_id,
                       _group_id=group_id, _created_at=created_at, _ttl=ttl, _message_type=message_type)
    return md


def new_message(metadata: Metadata, content: RecordDict) -> Message:
    """``make_message(metadata, content)`` without flwr's argument checks (typed inputs)."""
    metadata.__dict__["_delivered_at"] = ""  # what Message.__init__ sets (backward compatibility)
    msg = object.__new__(Message)
    msg.__dict__.update(_metadata=metadata, _content=content, _error=None)
    return msg


def new_array(dtype: str, shape: tuple[int, ...], stype: str, data: bytes) -> Array:
    """An ``Array`` as ``Array(dtype=..., shape=..., stype=..., data=...)`` leaves it (typed inputs)."""
    a = object.__new__(Array)
    a.__dict__.update(_is_dirty=True, dtype=dtype, shape=shape, stype=stype, data=data)
    return a


def array_record(items: dict[str, Array]) -> ArrayRecord:
    """An ``ArrayRecord`` holding ``items`` themselves (flwr's constructor would copy each Array)."""
    rec = object.__new__(ArrayRecord)
    TypedDict.__init__(rec, _ar._check_key, _ar._check_value)
    rec.__dict__["_data"].update(items)
    if items:  # flwr's __setitem__ sets the flag; an empty record leaves it unset (read as True)
        rec.__dict__["_is_dirty"] = True
    return rec


def config_record(items: dict[str, Any]) -> ConfigRecord:
    """A ``ConfigRecord`` of values already of the allowed types (decoded from protobuf)."""
    rec = object.__new__(ConfigRecord)
    TypedDict.__init__(rec, _cr._check_key, _cr._check_value)
    rec.__dict__["_data"].update(items)
    return rec


def record_dict(items: dict[str, Any]) -> RecordDict:
    """A ``RecordDict`` of records already of the allowed types."""
    rd = object.__new__(RecordDict)
    TypedDict.__init__(rd, _rd._check_key, _rd._check_value)
    rd.__dict__["_data"].update(items)
    return rd


_SCALAR_FIELDS = frozenset({"bool", "sint64", "uint64", "double", "string", "bytes"})  # ConfigRecordValue's scalars


def _config_values(items: Any) -> dict[str, Any]:
    """The values of a ConfigRecord protobuf, as flwr's ``record_value_dict_from_proto`` reads them
    (scalars straight from their oneof field; lists through flwr's reader)."""
    out: dict[str, Any] = {}
    for c in items:
        value = c.value
        field = value.WhichOneof("value")
        out[c.key] = getattr(value, field) if field in _SCALAR_FIELDS else \
            record_value_dict_from_proto({c.key: value})[c.key]
    return out


def message_from_proto(proto: Any) -> Message:
    """``flwr.common.serde.message_from_proto`` for messages with content: the same Message, built
    directly (a message with an error, or a record kind not on the hot path, goes to flwr's)."""
    if _PATH[0] != DIRECT and path() != DIRECT:
        return serde.message_from_proto(proto)
    return _from_proto(proto)


def _from_proto(proto: Any) -> Message:
    if proto.HasField("error") or not proto.HasField("content"):
        return serde.message_from_proto(proto)
    records: dict[str, Any] = {}
    for item in proto.content.items:
        field = item.WhichOneof("value")
        if field == "array_record":
            records[item.key] = array_record({
                a.key: new_array(a.value.dtype, tuple(a.value.shape), a.value.stype, a.value.data)
                for a in item.array_record.items})
        elif field == "config_record":
            records[item.key] = config_record(_config_values(item.config_record.items))
        else:  # metric records (control plane) and anything else: flwr's decoder
            return serde.message_from_proto(proto)
    md = proto.metadata
    if md.HasField("src_task_id") or md.HasField("dst_task_id"):
        return make_message(metadata=metadata_from_proto(md), content=record_dict(records))
    return new_message(new_metadata(run_id=md.run_id, message_id=md.message_id, src_node_id=md.src_node_id,
                                    dst_node_id=md.dst_node_id, reply_to_message_id=md.reply_to_message_id,
                                    group_id=md.group_id, created_at=md.created_at, ttl=md.ttl,
                                    message_type=md.message_type), record_dict(records))


DIRECT, FLWR = "direct", "flwr"  # the two decoder paths ``path()`` reports
_PATH = [""]  # the checked path of this process ("" until the first decode)


def _same(a: Any, b: Any) -> bool:
    """Same type and, recursively, the same attributes / items / value (flwr's objects compare
    only part of their state with ==)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dict__") and not callable(a):
        return _same(vars(a), vars(b))
    return bool(a == b)


def _probe_proto() -> Any:
    """A message through flwr's public constructors with every kind of record and value decoded here."""
    md = Metadata(7, "m-1", 3, 2**32 - 1, "r-0", "train:1:2", 12.5, 3600.0, "train.probe")
    arrays = ArrayRecord({"x": Array(dtype="float32", shape=(2, 3), stype="raw", data=bytes(range(24)))})
    config = ConfigRecord({"b": True, "i": -5, "f": 0.5, "s": "é", "y": b"\x00\x01", "l": [1, 2]})
    return serde.message_to_proto(make_message(md, RecordDict({"emb": arrays, "step": config})))


def path() -> str:
    """Which decoder this process uses with the installed flwr: ``"direct"`` (this module) when a
    probe decodes to objects with exactly the state of flwr's ``message_from_proto``, else ``"flwr"``.
    Checked once, then cached."""
    if not _PATH[0]:
        try:
            proto = _probe_proto()
            ok = _same(_from_proto(proto), serde.message_from_proto(proto))
        except Exception:  # another flwr layout (a renamed private attribute, a changed constructor)
            ok = False
        _PATH[0] = DIRECT if ok else FLWR
    return _PATH[0]
