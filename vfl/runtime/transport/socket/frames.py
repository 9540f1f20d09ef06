"""The socket data plane's frames (``vfl.runtime.transport.socket.chain``): a hand-written ``struct`` encoding
of ``list[Wire]`` and of a host's error, length-prefixed on a TCP stream — never pickle, so bytes
from whoever reaches a chain's port are only ever parsed, never run.

A frame is ``!Q`` body length, then the body: one type byte, then
``W``: ``!I`` count, per wire ``!QQQHHQ`` (src, dst, payload, len kind, len round, len data) + kind,
round (UTF-8) and data; ``E`` (a host's error) and ``D`` (a host found a peer gone): ``!I``-prefixed
UTF-8 strings host, type name, message. Every length is checked against what is left (a truncated or
padded body, a body over ``max_bytes``, an unknown type are a FrameError). A connection opens with a
handshake: the chain's 32-byte token, then ``!BHH`` (role, hop, predecessor index).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from vfl.core.errors import ProtocolError
from vfl.runtime.message import Wire

MAX_FRAME_BYTES = 1 << 32  # 4 GiB: a length prefix above this is refused before anything is allocated
TOKEN_BYTES = 32
_LEN = struct.Struct("!Q")
_COUNT = struct.Struct("!I")
_WIRE = struct.Struct("!QQQHHQ")
_STR = struct.Struct("!I")
_HELLO = struct.Struct("!BHH")
WIRES, ERROR, DIED = b"W", b"E", b"D"
ROLE_IN, ROLE_OUT = 0, 1  # the connector writes this hop's input / reads the last hop's output (the driver)


class FrameError(ProtocolError):
    """A malformed, truncated or oversized frame (or a peer that closed mid-frame)."""


class PeerGone(FrameError):
    """The peer closed the connection (or reset it) between frames: its process ended or it stopped."""


@dataclass(frozen=True)
class ChainFault:
    """What a host sent instead of wires: its own error (``died`` False) or a peer it lost (True)."""

    host: str
    type: str
    message: str
    died: bool = False


def encode_wires(wires: Sequence[Wire]) -> bytes:
    """One ``W`` frame (length prefix included)."""
    parts = [WIRES, _COUNT.pack(len(wires))]
    for w in wires:
        kind, rnd = w.kind.encode(), w.round.encode()
        parts += [_WIRE.pack(w.src, w.dst, w.payload, len(kind), len(rnd), len(w.data)), kind, rnd, w.data]
    body = b"".join(parts)
    return _LEN.pack(len(body)) + body


def encode_fault(fault: ChainFault) -> bytes:
    """One ``E`` or ``D`` frame (length prefix included)."""
    parts = [DIED if fault.died else ERROR]
    for s in (fault.host, fault.type, fault.message):
        b = s.encode("utf-8", "replace")
        parts += [_STR.pack(len(b)), b]
    body = b"".join(parts)
    return _LEN.pack(len(body)) + body


def decode_body(body: bytes | bytearray | memoryview) -> list[Wire] | ChainFault:
    """The wires or the fault of one frame body (without its length prefix)."""
    mv = memoryview(body)
    if len(mv) < 1:
        raise FrameError("empty frame")
    kind, at = bytes(mv[:1]), 1
    if kind == WIRES:
        (count,), at = _unpack(_COUNT, mv, at), at + _COUNT.size
        if count > (len(mv) - at) // _WIRE.size:
            raise FrameError(f"frame claims {count} wires in {len(mv) - at} bytes")
        wires = []
        for _ in range(count):
            src, dst, payload, nk, nr, nd = _unpack(_WIRE, mv, at)
            at += _WIRE.size
            k, at = _take(mv, at, nk), at + nk
            r, at = _take(mv, at, nr), at + nr
            data, at = _take(mv, at, nd), at + nd
            wires.append(Wire(src=src, dst=dst, kind=_text(k), round=_text(r), data=data, payload=payload))
        out: list[Wire] | ChainFault = wires
    elif kind in (ERROR, DIED):
        strings = []
        for _ in range(3):
            (n,), at = _unpack(_STR, mv, at), at + _STR.size
            s, at = _take(mv, at, n), at + n
            strings.append(_text(s))
        out = ChainFault(strings[0], strings[1], strings[2], died=kind == DIED)
    else:
        raise FrameError(f"unknown frame type {kind!r}")
    if at != len(mv):
        raise FrameError(f"{len(mv) - at} bytes after the end of the frame")
    return out


def _unpack(st: struct.Struct, mv: memoryview, at: int) -> tuple[int, ...]:
    if at + st.size > len(mv):
        raise FrameError("truncated frame")
    return st.unpack_from(mv, at)


def _take(mv: memoryview, at: int, n: int) -> bytes:
    if at + n > len(mv):
        raise FrameError("truncated frame")
    return bytes(mv[at:at + n])


def _text(b: bytes) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError("a text field is not UTF-8") from None


def read_exact(sock: socket.socket, n: int) -> bytearray:
    """``n`` bytes from ``sock`` (blocking, or up to its timeout); PeerGone on EOF or reset before
    the first byte, FrameError after it (a frame cut in half)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        try:
            k = sock.recv_into(view[got:], n - got)
        except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError) as exc:
            raise (PeerGone if got == 0 else FrameError)(f"connection lost: {exc}") from None
        if k == 0:
            raise (PeerGone("connection closed") if got == 0 else FrameError("connection closed mid-frame"))
        got += k
    return buf


def read_frame(sock: socket.socket, *, max_bytes: int = MAX_FRAME_BYTES) -> list[Wire] | ChainFault:
    """The next frame of ``sock``, decoded; a length over ``max_bytes`` is refused unread."""
    (n,) = _LEN.unpack(read_exact(sock, _LEN.size))
    if n > max_bytes:
        raise FrameError(f"frame of {n} bytes exceeds the limit of {max_bytes}")
    try:
        body = read_exact(sock, n)
    except PeerGone:
        raise FrameError("connection closed mid-frame") from None
    return decode_body(body)


def hello(token: bytes, *, role: int, hop: int, pred: int) -> bytes:
    """The first bytes of a connection: the chain's token and which edge of the chain it is."""
    return token + _HELLO.pack(role, hop, pred)


def read_hello(sock: socket.socket) -> tuple[bytes, int, int, int]:
    """(token, role, hop, predecessor index) of a new connection."""
    raw = bytes(read_exact(sock, TOKEN_BYTES + _HELLO.size))
    role, hop, pred = _HELLO.unpack_from(raw, TOKEN_BYTES)
    return raw[:TOKEN_BYTES], role, hop, pred
