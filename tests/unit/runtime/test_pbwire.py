"""``vfl.runtime.fast.pbwire``: the directly written protobuf bytes equal flwr's encoder on generated messages,
and decoding them gives flwr's own ``message_from_proto`` objects."""

from __future__ import annotations

import math

import numpy as np
import pytest
from flwr import __version__ as flwr_version
from flwr.common import ArrayRecord, ConfigRecord, Message, RecordDict, serde
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.runtime.test_fastrecords import assert_same_message
from vfl.runtime import message as wire
from vfl.runtime.fast import pbwire
from vfl.runtime.fast import records as fastrecords

_U64 = st.integers(0, 2**64 - 1)
_TEXT = st.text(max_size=12)  # unicode included; "" is proto3's default (omitted)
_FLOAT = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 5e-324])
_KIND = st.sampled_from(["train", "evaluate", "query", "train.forward", "query.metrics", "evaluate.x_1"])
_SCALAR = (st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.integers(2**63, 2**64 - 1) | _FLOAT | _TEXT
           | st.binary(max_size=20))
_LIST = (st.lists(st.integers(-5, 5), max_size=3) | st.lists(_TEXT, min_size=1, max_size=2)
         | st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=3) | st.lists(st.booleans(), max_size=3)
         | st.lists(_FLOAT, min_size=1, max_size=3) | st.lists(st.binary(max_size=8), min_size=1, max_size=2))
_ARRAY = st.builds(lambda dtype, shape, stype, data: fastrecords.new_array(dtype, shape, stype, data),
                   st.sampled_from(["float32", "<f4", "int64", "uint8", ""]),
                   st.lists(st.integers(0, 2**31 - 1), max_size=3).map(tuple),
                   st.sampled_from(["raw", "numpy.ndarray", ""]), st.binary(max_size=64))


@st.composite
def _messages(draw: st.DrawFn, *, lists: bool = True) -> Message:
    records: dict[str, ArrayRecord | ConfigRecord] = {}
    for key in draw(st.lists(_TEXT, max_size=3, unique=True)):
        if draw(st.booleans()):
            records[key] = fastrecords.array_record(draw(st.dictionaries(_TEXT, _ARRAY, max_size=3)))
        else:
            values = _SCALAR | _LIST if lists else _SCALAR
            records[key] = ConfigRecord(draw(st.dictionaries(_TEXT, values, max_size=4)))
    md = fastrecords.new_metadata(
        run_id=draw(_U64), message_id=draw(_TEXT), src_node_id=draw(_U64), dst_node_id=draw(_U64),
        reply_to_message_id=draw(_TEXT), group_id=draw(_TEXT), created_at=draw(_FLOAT), ttl=draw(_FLOAT),
        message_type=draw(_KIND))
    return fastrecords.new_message(md, fastrecords.record_dict(records))


def _flwr_bytes(message: Message) -> bytes:
    return serde.message_to_proto(message).SerializeToString()  # type: ignore[no-any-return]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_messages())
def test_written_bytes_equal_flwr_encoder(message: Message) -> None:
    fast = pbwire.encode(message)
    assert fast is None or fast == _flwr_bytes(message)
    assert wire.encode(message) == _flwr_bytes(message)  # the fallback keeps the bytes too


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_messages(lists=False))
def test_scalar_messages_take_the_fast_path(message: Message) -> None:
    """Without lists or big unsigned ints every generated message is written here (the property
    above is not vacuous) and decodes to flwr's own objects."""
    has_big = any(isinstance(v, int) and not isinstance(v, bool) and v >= 2**63
                  for rec in message.content.values() if isinstance(rec, ConfigRecord) for v in rec.values())
    fast = pbwire.encode(message)
    assert (fast is None) == has_big
    data = wire.encode(message)
    decoded = wire.decode(data)
    ref = serde.message_from_proto(serde.ProtoMessage.FromString(data))
    if any(isinstance(v, float) and math.isnan(v) for v in (ref.metadata.ttl, ref.metadata.created_at)):
        return  # NaN != NaN: the metadata cannot compare equal (the bytes above already did)
    if any(isinstance(v, float) and math.isnan(v)
           for rec in ref.content.values() if isinstance(rec, ConfigRecord) for v in rec.values()):
        return
    assert_same_message(decoded, ref)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_messages())
def test_list_messages_take_the_fast_path(message: Message) -> None:
    """Lists of one kind (SecAgg's names, releases, survivors) are written here too, with flwr's bytes."""
    values = [x for rec in message.content.values() if isinstance(rec, ConfigRecord) for v in rec.values()
              for x in (v if isinstance(v, list) else [v])]
    has_big = any(isinstance(x, int) and not isinstance(x, bool) and x >= 2**63 for x in values)
    fast = pbwire.encode(message)
    assert (fast is None) == has_big
    assert fast is None or fast == _flwr_bytes(message)


def test_hot_path_messages_are_written_directly() -> None:
    """The vertical step's messages (embeddings up, gradient broadcast down) never fall back."""
    emb = np.random.default_rng(0).random((100, 16), dtype=np.float32)
    cfg = wire.config(epoch=3, step=70, forward=True, grad_step=-1)
    up = wire.make("train.forward", src=3, dst=0, round="train:3:70", reply_to="000000000000002a",
                   content=wire.records(emb=wire.arrays(float=emb), step=cfg))
    down = wire.make("train.forward", src=0, dst=wire.BROADCAST, round="train:3:70",
                     content=wire.records(grad=wire.arrays(all=emb), step=cfg))
    for m in (up, down):
        assert pbwire.encode(m) is not None and pbwire.encode(m) == _flwr_bytes(m)


def test_out_of_scope_messages_fall_back() -> None:
    """Errors, no content, metric records, task ids and lists of uint64-sized ints go to flwr's encoder."""
    base = wire.make("train.x", src=1, dst=0, round="r")
    assert pbwire.encode(base) is not None  # empty content is in scope
    no_content = fastrecords.new_message(base.metadata, RecordDict())
    no_content.__dict__["_content"] = None
    metrics = wire.metrics_reply(wire.make("query.metrics", src=0, dst=0, round="control:0:0"), loss=0.5)
    listed = wire.make("train.x", src=1, dst=0, round="r", content=wire.records(c=ConfigRecord({"l": [1, 2**63]})))
    tasked = wire.make("train.x", src=1, dst=0, round="r")
    tasked.metadata.src_task_id = 7
    numpy_shape = wire.make("train.x", src=1, dst=0, round="r", content=wire.records(
        a=fastrecords.array_record({"x": fastrecords.new_array("f4", (np.int64(2),), "raw", b"\0" * 8)})))  # type: ignore[arg-type]
    for m in (no_content, metrics, listed, tasked, numpy_shape):
        assert pbwire.encode(m) is None
        if m.has_content():
            assert wire.encode(m) == _flwr_bytes(m)


def _hot_path_message() -> Message:
    emb = np.arange(32, dtype=np.float32).reshape(2, 16)
    return wire.make("train.forward", src=3, dst=0, round="train:3:70", reply_to="000000000000002a",
                     content=wire.records(emb=wire.arrays(float=emb), step=wire.config(epoch=3, step=70)))


@pytest.mark.parametrize("path", [f"{pbwire.path()}-flwr{flwr_version}"])
def test_the_path_this_flwr_gets_keeps_flwr_bytes(path: str) -> None:
    """The test id names the encoder path the installed flwr got (``-v``; e.g. in ``make test-lower``):
    either way the bytes on the wire are flwr's own."""
    m = _hot_path_message()
    direct = pbwire.encode(m)
    assert (direct is not None) == path.startswith(pbwire.DIRECT + "-")
    assert wire.encode(m) == _flwr_bytes(m)


def test_a_flwr_with_another_schema_gets_its_own_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flwr whose encoder writes other bytes (a new field) turns the writer off for the process:
    the control is the same message written directly before the switch."""
    m = _hot_path_message()
    assert pbwire.path() == pbwire.DIRECT and pbwire.encode(m) is not None  # control: installed flwr
    real = serde.message_to_proto

    class _NewField:  # what a newer flwr's proto would serialize: our bytes plus a field 15
        def __init__(self, message: Message) -> None:
            self.message = message

        def SerializeToString(self) -> bytes:  # noqa: N802 (protobuf's name)
            return real(self.message).SerializeToString() + b"\x7a\x01x"  # type: ignore[no-any-return]

    monkeypatch.setattr(pbwire, "_PATH", [""])
    monkeypatch.setattr(pbwire.serde, "message_to_proto", _NewField)
    assert pbwire.path() == pbwire.FLWR
    assert pbwire.encode(m) is None  # so vfl.runtime.message.encode uses flwr's serde


def test_a_flwr_with_another_layout_gets_its_own_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metadata without the private attributes the writer reads (another flwr's layout): no crash,
    flwr's encoder takes every message."""
    probe = pbwire._probe()
    del probe.metadata.__dict__["_src_task_id"]
    monkeypatch.setattr(pbwire, "_PATH", [""])
    monkeypatch.setattr(pbwire, "_probe", lambda: probe)
    assert pbwire.path() == pbwire.FLWR
    assert pbwire.encode(_hot_path_message()) is None
