"""The socket data plane's frame codec (``vfl.runtime.transport.socket.frames``): any ``list[Wire]`` and any fault
round-trip; a truncated, padded, oversized or unknown frame is a FrameError, never a wrong value."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vfl.runtime.message import BROADCAST, Wire
from vfl.runtime.transport.socket.frames import (
    ChainFault,
    FrameError,
    PeerGone,
    decode_body,
    encode_fault,
    encode_wires,
    read_frame,
)

_u64 = st.integers(min_value=0, max_value=2**64 - 1)
_wires = st.lists(st.builds(Wire, src=_u64, dst=st.one_of(st.just(BROADCAST), _u64), kind=st.text(max_size=40),
                            round=st.text(max_size=40), data=st.binary(max_size=300), payload=_u64), max_size=6)
_faults = st.builds(ChainFault, host=st.text(max_size=30), type=st.text(max_size=30), message=st.text(max_size=200),
                    died=st.booleans())


@settings(max_examples=200, deadline=None)
@given(_wires)
def test_wires_round_trip(wires):
    frame = encode_wires(wires)
    assert int.from_bytes(frame[:8], "big") == len(frame) - 8
    assert decode_body(frame[8:]) == wires


@settings(max_examples=100, deadline=None)
@given(_faults)
def test_faults_round_trip(fault):
    assert decode_body(encode_fault(fault)[8:]) == fault


@settings(max_examples=100, deadline=None)
@given(st.one_of(_wires.filter(bool).map(encode_wires), _faults.map(encode_fault)), st.data())
def test_a_cut_or_padded_body_is_an_error(frame, data):
    body = frame[8:]
    cut = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
    with pytest.raises(FrameError):
        decode_body(body[:cut])
    with pytest.raises(FrameError, match="after the end"):
        decode_body(body + data.draw(st.binary(min_size=1, max_size=8)))


def test_unknown_type_huge_counts_and_bad_text_are_errors():
    with pytest.raises(FrameError, match="unknown frame type"):
        decode_body(b"X")
    with pytest.raises(FrameError, match="empty"):
        decode_body(b"")
    with pytest.raises(FrameError, match="claims"):  # refused before a loop over 2**32 - 1 wires
        decode_body(b"W" + (2**32 - 1).to_bytes(4, "big"))
    bad = bytearray(encode_wires([Wire(src=1, dst=2, kind="k", round="r", data=b"", payload=0)])[8:])
    bad[-2] = 0xFF  # the kind's one byte: not UTF-8
    with pytest.raises(FrameError, match="UTF-8"):
        decode_body(bytes(bad))


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    return a, b


def test_read_frame_reads_a_stream_and_refuses_oversized_and_cut_frames():
    wires = [Wire(src=3, dst=BROADCAST, kind="train.forward", round="train:0:1", data=b"x" * 1000, payload=12)]
    a, b = _pair()
    with a, b:
        a.sendall(encode_wires(wires) + encode_wires([]))
        assert read_frame(b) == wires and read_frame(b) == []
        a.sendall(encode_wires(wires))
        with pytest.raises(FrameError, match="exceeds the limit"):  # refused from the length alone
            read_frame(b, max_bytes=100)
    a, b = _pair()
    with a, b:
        a.sendall(encode_wires(wires)[:50])
        a.close()
        with pytest.raises(FrameError, match="mid-frame"):
            read_frame(b)
    a, b = _pair()
    with a, b:
        a.close()
        with pytest.raises(PeerGone):  # between frames: the peer is gone, not a bad frame
            read_frame(b)
