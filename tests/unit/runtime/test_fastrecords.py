"""``vfl.runtime.fast.records``: the hot-path decoder and record builders give the very objects flwr's own
constructors and ``message_from_proto`` give (same classes, same attributes, same re-encoding)."""

from __future__ import annotations

import numpy as np
import pytest
from flwr import __version__ as flwr_version
from flwr.common import Array, ArrayRecord, ConfigRecord, Error, Message, RecordDict, serde

from vfl.runtime import message as wire
from vfl.runtime.auth import HostAuth
from vfl.runtime.fast import records as fastrecords


def _state(obj: object) -> dict[str, object]:
    """An object's attributes, records and arrays compared by value (the check functions by identity)."""
    return {k: _state(v) if isinstance(v, Array) else v for k, v in vars(obj).items() if k != "_data"}


def assert_same_message(fast: Message, ref: Message) -> None:
    assert type(fast) is type(ref)
    assert fast.metadata == ref.metadata
    assert fast.has_content() == ref.has_content()
    if not ref.has_content():
        return
    assert list(fast.content) == list(ref.content)
    for key, ref_rec in ref.content.items():
        rec = fast.content[key]
        assert type(rec) is type(ref_rec)
        assert _state(rec) == _state(ref_rec)
        assert list(rec) == list(ref_rec)
        for name, value in ref_rec.items():
            got = rec[name]
            assert type(got) is type(value)
            if isinstance(value, Array):
                assert _state(got) == _state(value)
            else:
                assert got == value
    assert _state(fast.content) == _state(ref.content)
    assert serde.message_to_proto(fast).SerializeToString() == serde.message_to_proto(ref).SerializeToString()


def _messages() -> list[Message]:
    rng = np.random.default_rng(0)
    cfg = wire.config(epoch=1, step=2, forward=True, lr=0.5, name="x", blob=b"\x00\x01", ints=[1, 2, 3],
                      floats=[0.5, 1.5], strs=["a", "b"], flags=[True, False], blobs=[b"a", b"bc"])
    return [
        wire.make("train.x", src=1, dst=0, round="train:1:2", reply_to="0000000000000003",
                  content=wire.records(emb=wire.arrays(float=rng.random((4, 3), dtype=np.float32),
                                                       counts=rng.integers(0, 9, (4, 3)).astype(np.uint8)),
                                       step=cfg)),
        wire.make("train.x", src=0, dst=wire.BROADCAST, round="train:1:2",
                  content=wire.records(grad=wire.arrays(all=rng.random((2, 5)).astype(np.float64)), step=cfg)),
        wire.make("train.x", src=0, dst=0, round="control:0:0"),  # no content
        wire.metrics_reply(wire.make("query.metrics", src=0, dst=0, round="control:0:0"), loss=0.25, n=3),
        wire.make("train.x", src=1, dst=0, round="train:0:0",
                  content=wire.records(mixed=ArrayRecord({"np": Array(np.arange(6, dtype=np.int64).reshape(2, 3))}),
                                       empty=wire.config())),  # flwr's own numpy serialization
    ]


@pytest.mark.parametrize("index", range(5))
def test_decode_equals_flwr_message_from_proto(index: int) -> None:
    data = wire.encode(_messages()[index])
    proto = serde.ProtoMessage.FromString(data)
    assert_same_message(fastrecords.message_from_proto(proto), serde.message_from_proto(proto))
    assert_same_message(wire.decode(data), serde.message_from_proto(proto))


def _signed(message: Message) -> wire.Wire:
    """``message`` (from node 1 to node 0) authenticated by a host running both nodes."""
    host = HostAuth({0: "p0", 1: "p1"}, host="h")
    host.install({n: (f"p{n}", *k) for n, k in host.public_keys().items()})
    return host.sign(1, wire.Wire.of(message))


def test_decode_of_a_signed_wire_equals_flwr() -> None:
    """The auth record (a bytes value appended as a protobuf fragment) decodes the same way."""
    signed = _signed(_messages()[0])
    proto = serde.ProtoMessage.FromString(signed.data)
    assert_same_message(fastrecords.message_from_proto(proto), serde.message_from_proto(proto))


def test_error_message_goes_to_flwr() -> None:
    msg = Message(Error(code=3, reason="boom"), reply_to=_messages()[0])
    proto = serde.message_to_proto(msg)
    assert fastrecords.message_from_proto(proto).error == serde.message_from_proto(proto).error


def test_builders_equal_flwr_constructors() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ref = Array(dtype="f4", shape=(3, 4), stype="raw", data=x.tobytes())
    fast = fastrecords.new_array("f4", (3, 4), "raw", x.tobytes())
    assert fast == ref and _state(fast) == _state(ref)
    assert _state(wire.arrays(a=x)) == _state(ArrayRecord({"a": ref}))
    assert wire.arrays(a=x)["a"] == ref
    rec = fastrecords.config_record({"k": 1, "l": [1, 2]})
    assert _state(rec) == _state(ConfigRecord({"k": 1, "l": [1, 2]})) and dict(rec) == {"k": 1, "l": [1, 2]}
    rd = fastrecords.record_dict({"c": rec})
    assert _state(rd) == _state(RecordDict({"c": rec})) and rd["c"] is rec


def test_built_records_still_validate_later_writes() -> None:
    """Records built directly keep flwr's checks for what is set on them afterwards."""
    rec = fastrecords.config_record({"k": 1})
    with pytest.raises(TypeError):
        rec["bad"] = object()  # type: ignore[assignment]
    rd = fastrecords.record_dict({})
    with pytest.raises(TypeError):
        rd["bad"] = 3  # type: ignore[assignment]
    arr = wire.arrays(a=np.zeros(2, np.float32))
    with pytest.raises(TypeError):
        arr["b"] = np.zeros(2)  # type: ignore[assignment]


def test_config_and_records_equal_flwr_and_keep_its_checks() -> None:
    values = {"e": 1, "f": True, "x": 0.5, "s": "a", "b": b"z"}
    assert _state(wire.config(**values)) == _state(ConfigRecord(dict(values)))
    assert dict(wire.config(**values)) == values
    odd = {"n": np.float64(0.5), "l": [1, 2]}  # numpy scalars and lists: flwr's own constructor
    assert dict(wire.config(**odd)) == dict(ConfigRecord(dict(odd)))
    with pytest.raises(TypeError):
        wire.config(bad=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        wire.config(bad=np.zeros(2))  # type: ignore[arg-type]
    named = {"c": wire.config(k=1), "a": wire.arrays(x=np.zeros(2, np.float32))}
    assert _state(wire.records(**named)) == _state(RecordDict(dict(named)))
    assert list(wire.records(**named)) == ["c", "a"]
    with pytest.raises(TypeError):
        wire.records(bad=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("index", range(5))
def test_encode_gives_flwr_bytes(index: int) -> None:
    msg = _messages()[index]
    assert wire.encode(msg) == serde.message_to_proto(msg).SerializeToString()


def test_encode_of_odd_values_gives_flwr_bytes() -> None:
    """Big unsigned ints, numpy scalars, empty records and a decoded signed message: flwr's bytes."""
    odd = wire.records(c=ConfigRecord({"u": 2**63 + 5, "n": np.float64(0.25), "neg": -3}), e=wire.config(),
                       a=ArrayRecord())
    msg = wire.make("train.x", src=2, dst=0, round="train:0:1", content=odd)
    assert wire.encode(msg) == serde.message_to_proto(msg).SerializeToString()
    signed = _signed(_messages()[0])
    decoded = wire.decode(signed.data)
    assert wire.encode(decoded) == serde.message_to_proto(decoded).SerializeToString()


def _hot_proto() -> object:
    emb = np.arange(32, dtype=np.float32).reshape(2, 16)
    m = wire.make("train.forward", src=3, dst=0, round="train:3:70", reply_to="000000000000002a",
                  content=wire.records(emb=wire.arrays(float=emb), step=wire.config(epoch=3, step=70)))
    return serde.ProtoMessage.FromString(wire.encode(m))


@pytest.mark.parametrize("path", [f"{fastrecords.path()}-flwr{flwr_version}"])
def test_the_decoder_path_this_flwr_gets_gives_flwrs_objects(path: str) -> None:
    """The test id names the decoder path the installed flwr got (``-v``, e.g. in ``make test-lower``);
    either way the decoded message has the state of flwr's own."""
    assert path.startswith((fastrecords.DIRECT + "-", fastrecords.FLWR + "-"))
    proto = _hot_proto()
    assert_same_message(fastrecords.message_from_proto(proto), serde.message_from_proto(proto))


def test_a_flwr_with_another_layout_gets_its_own_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects built here that miss an attribute flwr's constructor sets (another flwr's layout) turn
    the direct decoder off for the process; the control is the installed flwr, where it is on."""
    assert fastrecords.path() == fastrecords.DIRECT  # control
    real = fastrecords.new_metadata

    def with_an_extra_attribute(**kw: object) -> object:  # as if flwr had added an attribute we do not set
        md = real(**kw)  # type: ignore[arg-type]
        md.__dict__["_not_in_flwr"] = 1
        return md

    monkeypatch.setattr(fastrecords, "_PATH", [""])
    monkeypatch.setattr(fastrecords, "new_metadata", with_an_extra_attribute)
    assert fastrecords.path() == fastrecords.FLWR
    proto = _hot_proto()
    decoded = fastrecords.message_from_proto(proto)
    assert "_not_in_flwr" not in vars(decoded.metadata)  # flwr's decoder built it
    assert_same_message(decoded, serde.message_from_proto(proto))
