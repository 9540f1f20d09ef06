"""The one message envelope: flwr ``Message`` + ``RecordDict``, serialized with flwr's protobuf serde.

Every exchange between nodes is built here (src, dst, round, kind, reply-to in flwr
``Metadata``) and turned into bytes with ``message_to_proto(...).SerializeToString()`` — never
pickle. Arrays travel as flwr ``Array`` objects with ``stype="raw"`` (little-endian bytes plus
dtype and shape in the record) so that no per-array npy header inflates the envelope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from flwr.common import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Message,
    MetricRecord,
    RecordDict,
    serde,
)

from vfl.core.errors import ProtocolError
from vfl.runtime import accel, profile

__all__ = [  # the message helpers a strategy or node author uses (docs/writing-a-strategy.md)
    "BROADCAST", "METRICS", "METRICS_RECORD", "Message", "Wire", "arrays", "config", "config_int", "config_list", "config_of",
    "config_value", "decode", "encode", "from_array", "get_array", "has_array", "make", "metric_floats", "metrics",
    "metrics_reply", "parse_round", "payload_nbytes", "read_metrics", "record_of", "records", "reply", "round_of",
    "round_tag", "to_array",
]

R = TypeVar("R", ArrayRecord, ConfigRecord, MetricRecord)
BROADCAST = 2**32 - 1  # dst of a message delivered to every party node (serialized and counted once)
RAW_STYPE = "raw"
# Metadata fields left at flwr's proto3 defaults, so that they take no byte on the wire (issue #29.2): run id,
# message id and reply-to id (flwr's infrastructure assigns message ids when it stores a message; here
# nothing routes or matches by them: a reply is known by its round tag, kind and ends, and with ``auth``
# the authenticator's sequence number identifies a wire), created-at and TTL (no message expires
# inside a run). All of them stay in the authenticated bytes when set.
_RUN_ID = 0
_TTL = 0.0
_CREATED_AT = 0.0
_SCALARS = frozenset({bool, int, float, str, bytes})  # ConfigRecord values stored without re-checking
_RECORDS = frozenset({ArrayRecord, ConfigRecord, MetricRecord})

# control-plane vocabulary shared by every protocol: the driver's read of a node's running metrics
METRICS = "query.metrics"  # driver -> node (src == dst: counted as control)
METRICS_RECORD = "metrics"  # the one metric record name of its reply


def round_tag(epoch: int, step: int, phase: str = "train") -> str:
    """The round tag of a message, ``"phase:epoch:step"``: which round of which phase it belongs to.

    "Round" is our word for it; flwr stores it in ``Metadata.group_id`` (read it with ``round_of``).
    The word "group" in this code base means an actor group (``vfl.runtime.transport.base.HostGroup``).
    """
    return f"{phase}:{epoch}:{step}"


def round_of(message: Message) -> str:
    """The round tag of ``message`` (flwr's ``Metadata.group_id``)."""
    return str(message.metadata.group_id)


def parse_round(tag: str) -> tuple[str, int, int]:
    """Inverse of ``round_tag`` (``("setup", -1, -1)`` style tags are allowed)."""
    try:
        phase, epoch, step = tag.split(":")
        return phase, int(epoch), int(step)
    except ValueError:
        raise ProtocolError(f"malformed round tag {tag!r}") from None


def make(
    kind: str,
    *,
    src: int,
    dst: int,
    round: str,
    content: RecordDict | None = None,
    reply_to: str = "",
) -> Message:
    """A flwr ``Message`` with explicit ``Metadata`` (no global run/task identity is touched).

    Args:
        kind: the message kind (``train.*``, ``evaluate.*`` or ``query.*``; flwr refuses others).
        src, dst: node ids; ``dst=BROADCAST`` reaches every party node (serialized and counted once).
        round: the round tag (``round_tag``); its phase decides the ledger phase.
        content: the records; empty when None.
        reply_to: the message id this answers ("" for a request, and for a reply to a message of ``make``).

    Returns:
        The message; its run id, message id, created-at and TTL are flwr's defaults (no wire bytes).
    """
    t0 = profile.start()
    if content is None:
        content = RecordDict()
    elif not isinstance(content, RecordDict):
        raise TypeError(f"message content must be a RecordDict, not {type(content).__name__}")
    metadata = accel.new_metadata(  # = flwr's Metadata(...), its checks kept (vfl/runtime/accel.py)
        run_id=_RUN_ID,
        message_id="",
        src_node_id=src,
        dst_node_id=dst,
        reply_to_message_id=reply_to,
        group_id=round,
        created_at=_CREATED_AT,
        ttl=_TTL,
        message_type=kind,
    )
    out = accel.new_message(metadata, content)
    profile.stop("build", t0)
    return out


def reply(to: Message, kind: str | None = None, *, src: int | None = None, dst: int | None = None,
          content: RecordDict | None = None) -> Message:
    """A message answering ``to``.

    Args:
        to: the request.
        kind: the reply's kind (default: the request's).
        src, dst: default to the request's dst and src (back to its sender).
        content: the records.

    Returns:
        A message in the same round with ``reply_to_message_id`` = the request's message id (empty for a
        request built by ``make``, which leaves message ids to flwr's infrastructure).
    """
    md = to.metadata
    return make(
        kind or md.message_type,
        src=md.dst_node_id if src is None else src,
        dst=md.src_node_id if dst is None else dst,
        round=md.group_id,
        content=content,
        reply_to=md.message_id,
    )


def encode(message: Message) -> bytes:
    """Serialize with flwr's protobuf serde."""
    t0 = profile.start()
    data = serde.message_to_proto(message).SerializeToString()
    profile.stop("serialize", t0)
    return data


def decode(data: bytes) -> Message:
    """Deserialize bytes produced by ``encode``."""
    t0 = profile.start()
    try:
        message = accel.message_from_proto(serde.ProtoMessage.FromString(data))  # = flwr's message_from_proto
    except Exception as exc:  # protobuf raises DecodeError / ValueError variants
        raise ProtocolError(f"cannot decode message ({len(data)} bytes): {exc}") from exc
    profile.stop("deserialize", t0)
    return message


def to_array(x: np.ndarray) -> Array:
    """A raw flwr ``Array`` (dtype, shape and the bytes; no npy header)."""
    t0 = profile.start()
    x = np.ascontiguousarray(x)
    if x.dtype.byteorder == ">":
        x = x.astype(x.dtype.newbyteorder("<"))
    out = accel.new_array(x.dtype.str.lstrip("<|="), tuple(int(s) for s in x.shape), RAW_STYPE, x.tobytes())
    profile.stop("build", t0)
    return out


def from_array(a: Array) -> np.ndarray:
    """Inverse of ``to_array``; also accepts flwr's default numpy-serialized arrays."""
    if a.stype == RAW_STYPE:
        return np.frombuffer(a.data, dtype=np.dtype(a.dtype)).reshape(a.shape)
    return a.numpy()


def arrays(**named: np.ndarray) -> ArrayRecord:
    """An ``ArrayRecord`` of raw arrays (holding them as they are: flwr's constructor would copy each)."""
    return accel.array_record({str(k): to_array(v) for k, v in named.items()})


def record_of(message: Message, name: str, kind: type[R]) -> R | None:
    """The record ``name`` if it is a ``kind``, read from the RecordDict itself (flwr's
    ``array_records``/``config_records`` views copy every record into a new dict on each access)."""
    rec = message.content.get(name) if message.has_content() else None
    return rec if isinstance(rec, kind) else None


def config_of(message: Message, name: str) -> ConfigRecord:
    """The config record ``name``, with a ProtocolError naming what is missing."""
    rec = record_of(message, name, ConfigRecord)
    if rec is None:
        raise ProtocolError(f"message {message.metadata.message_type} from node {message.metadata.src_node_id} "
                            f"has no config record {name}")
    return rec


def get_array(message: Message, record: str, name: str) -> np.ndarray:
    """Read one array, with a ProtocolError naming what is missing."""
    try:
        rec = record_of(message, record, ArrayRecord)
        if rec is None:
            raise KeyError(record)
        return from_array(rec[name])
    except KeyError:
        raise ProtocolError(
            f"message {message.metadata.message_type} from node {message.metadata.src_node_id} "
            f"has no array {record}/{name}"
        ) from None


def config(**values: int | float | str | bool | bytes | list[int] | list[float] | list[str]) -> ConfigRecord:
    """A ``ConfigRecord`` of scalars, bytes and lists (keys: the protocol's vocabulary module).

    Plain scalars are stored directly; anything else (lists, numpy scalars, a bad type) goes
    through flwr's validating constructor."""
    if all(type(v) in _SCALARS for v in values.values()):
        return accel.config_record(values)
    return ConfigRecord(dict(values))


def config_int(record: ConfigRecord, key: str) -> int:
    """``record[key]`` as an int; a ProtocolError naming the key when a peer sent something else."""
    value = record[key]
    if not isinstance(value, int):
        raise ProtocolError(f"config key {key!r}: got a {type(value).__name__}; expected an int")
    return value


def config_list(record: ConfigRecord, key: str) -> list[Any]:
    """``record[key]`` as a list; a ProtocolError naming the key when a peer sent a scalar."""
    value = record[key]
    if not isinstance(value, list):
        raise ProtocolError(f"config key {key!r}: got a {type(value).__name__}; expected a list")
    return value


def metrics(**values: int | float) -> MetricRecord:
    """A ``MetricRecord`` (control-plane replies; see ``metrics_reply``)."""
    return MetricRecord(dict(values))


def metrics_reply(to: Message, **values: int | float) -> Message:
    """The answer to a ``METRICS`` query: one ``METRICS_RECORD`` metric record."""
    return reply(to, content=records(**{METRICS_RECORD: metrics(**values)}))


def read_metrics(message: Message) -> dict[str, float]:
    """The values of a ``metrics_reply`` (ProtocolError if the record is missing)."""
    try:
        rec = message.content.metric_records[METRICS_RECORD]
    except KeyError:
        raise ProtocolError(f"message {message.metadata.message_type} from node {message.metadata.src_node_id} "
                            f"has no metric record {METRICS_RECORD!r}") from None
    return metric_floats(rec)


def metric_floats(record: MetricRecord) -> dict[str, float]:
    """A metric record's scalar values as floats; a ProtocolError naming a key that holds a list."""
    out = {}
    for k, v in record.items():
        if not isinstance(v, int | float):
            raise ProtocolError(f"metric {k!r}: got a {type(v).__name__}; expected a number")
        out[k] = float(v)
    return out


def payload_nbytes(message: Message) -> int:
    """Bytes of array data in the message (the payload); the rest of the wire size is envelope."""
    if not message.has_content():
        return 0
    return sum(len(arr.data) for record in message.content.values() if isinstance(record, ArrayRecord)
               for arr in record.values())


@dataclass(frozen=True)
class Wire:
    """A serialized message in flight: routing header + the exact bytes that cross the wire."""

    src: int
    dst: int
    kind: str
    round: str
    data: bytes
    payload: int

    @property
    def nbytes(self) -> int:
        return len(self.data)

    @classmethod
    def of(cls, message: Message) -> Wire:
        md = message.metadata
        return cls(src=md.src_node_id, dst=md.dst_node_id, kind=md.message_type, round=md.group_id,
                   data=encode(message), payload=payload_nbytes(message))

    def open(self) -> Message:
        return decode(self.data)


def records(**named: ArrayRecord | ConfigRecord | MetricRecord) -> RecordDict:
    """A ``RecordDict`` from named records (flwr's validating constructor unless every value is
    exactly one of flwr's record classes)."""
    if all(type(r) in _RECORDS for r in named.values()):
        return accel.record_dict(named)
    return RecordDict(dict(named))


def config_value(message: Message, record: str, key: str) -> object:
    """One value of a config record, with a ProtocolError naming what is missing."""
    try:
        rec = record_of(message, record, ConfigRecord)
        if rec is None:
            raise KeyError(record)
        return rec[key]
    except KeyError:
        raise ProtocolError(
            f"message {message.metadata.message_type} from node {message.metadata.src_node_id} "
            f"has no config {record}/{key}"
        ) from None


def has_array(message: Message, record: str, name: str | None = None) -> bool:
    """Whether the array record ``record`` (and, if given, its array ``name``) is present."""
    rec = record_of(message, record, ArrayRecord)
    if rec is None:
        return False
    return name is None or name in rec
