"""The host's side of a socket chain (``vfl.runtime.transport.socket.chain``): a mixin of ``NodeHost``.

``chain_listen`` opens a listening socket on the node's IP; ``chain_start`` connects to the
successors of every hop this host serves, accepts its predecessors (each connection must open with
the chain's token) and starts one daemon thread that, per step and per hop of the host in chain
order, reads one frame from every predecessor (blocking), runs ``deliver_piped`` on them (the same
outbox rows as the task path) and writes the replies as one frame to every successor. A host error
goes downstream as an error frame, a lost predecessor as a "died" frame. Every public method of the
host (but ``UNLOCKED``) takes the host's step lock, so an ordinary Ray task never runs while the
thread delivers. ``chain_stop`` ends the thread (the actor then serves only ordinary tasks).
"""

from __future__ import annotations

import functools
import hmac
import inspect
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vfl.runtime.message import Wire
from vfl.runtime.transport.socket.frames import (
    ROLE_IN,
    ROLE_OUT,
    ChainFault,
    FrameError,
    PeerGone,
    encode_fault,
    encode_wires,
    hello,
    read_frame,
    read_hello,
)

Hops = tuple[tuple[str, ...], ...]
HELLO_S = 5.0  # a connection must send its token and edge within this (a silent one is dropped)
DRIVER = None  # the predecessor of the first hop / successor of the last


def connect(address: tuple[str, int], first: bytes, *, timeout_s: float) -> socket.socket:
    """A TCP connection (no Nagle: a frame leaves at once) that has sent ``first``; then blocking."""
    sock = socket.create_connection(address, timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(first)
    sock.settimeout(None)
    return sock


def node_ip() -> str:
    """This node's IP inside a Ray worker (what other nodes reach), else loopback."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return str(ray.util.get_node_ip_address())
    return "127.0.0.1"


@dataclass
class _Loop:
    """One chain's sockets and thread on this host."""

    listener: socket.socket
    ins: dict[tuple[int, int, int], socket.socket] = field(default_factory=dict)  # (role, hop, pred) -> socket
    outs: dict[int, list[socket.socket]] = field(default_factory=dict)  # my hop -> sockets to its successors
    thread: threading.Thread | None = None
    stop: bool = False

    def sockets(self) -> list[socket.socket]:
        return [self.listener, *self.ins.values(), *(s for out in self.outs.values() for s in out)]


def _exclusive(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        lock = self.__dict__.get("_step_lock")  # none until a chain was started here: nothing to exclude
        if lock is None:
            return fn(self, *args, **kwargs)
        with lock:
            return fn(self, *args, **kwargs)
    return run


class ChainHost:
    """Serves socket chains; a subclass's public methods (but ``UNLOCKED``) run under the step lock."""

    UNLOCKED = frozenset({"ready", "pid", "chain_listen", "chain_start", "chain_stop"})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, fn in list(vars(cls).items()):
            if not name.startswith("_") and name not in cls.UNLOCKED and inspect.isfunction(fn):
                setattr(cls, name, _exclusive(fn))

    def deliver_piped(self, *parts: Sequence[Wire]) -> list[Wire]:
        raise NotImplementedError

    def _socket_loops(self) -> dict[str, _Loop]:
        loops: dict[str, _Loop] | None = self.__dict__.get("_chain_loops")
        if loops is None:
            loops = self.__dict__["_chain_loops"] = {}
        return loops

    def chain_listen(self, chain_id: str) -> tuple[str, int]:
        """Open chain ``chain_id``'s listening socket on this node's IP (any free port): (ip, port)."""
        self.__dict__.setdefault("_step_lock", threading.RLock())
        ip = node_ip()
        listener = socket.create_server((ip, 0), family=socket.AF_INET6 if ":" in ip else socket.AF_INET,
                                        backlog=1024)
        self._socket_loops()[chain_id] = _Loop(listener)
        return listener.getsockname()[:2]  # type: ignore[no-any-return]

    def chain_start(self, chain_id: str, *, token: bytes, me: str, hops: Hops,
                    addresses: dict[str, tuple[str, int]], timeout_s: float) -> None:
        """Connect to my successors, accept my predecessors (within ``timeout_s``) and start the loop."""
        loop = self._socket_loops()[chain_id]
        try:
            _wire_up(loop, token=token, me=me, hops=hops, addresses=addresses, timeout_s=timeout_s)
        except BaseException:
            _close(loop.sockets())
            self._socket_loops().pop(chain_id, None)
            raise
        loop.listener.close()  # every edge is connected: nobody else may come in
        loop.thread = threading.Thread(target=self._serve, args=(loop, me, hops), daemon=True,
                                       name=f"vfl-socket-chain-{chain_id}")
        loop.thread.start()

    def chain_stop(self, chain_id: str, wait_s: float = 5.0) -> bool:
        """Stop chain ``chain_id``'s loop: True once it ended (False: stuck inside a delivery)."""
        loop = self._socket_loops().pop(chain_id, None)
        if loop is None:
            return True
        loop.stop = True
        for s in loop.sockets():  # wakes a blocked read or write in the loop thread
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if loop.thread is not None:
            loop.thread.join(wait_s)
            if loop.thread.is_alive():
                return False
        _close(loop.sockets())
        return True

    def _serve(self, loop: _Loop, me: str, hops: Hops) -> None:
        """The loop thread: every step, each of my hops in order (see the module docstring)."""
        mine = [i for i, hop in enumerate(hops) if me in hop]
        local: dict[int, list[Wire] | ChainFault] = {}  # what I sent at hop i, for me at hop i + 1
        while not loop.stop:
            for at, i in enumerate(mine):
                parts: list[list[Wire]] = []
                fault: ChainFault | None = None
                gone = False
                for j, pred in enumerate(hops[i - 1] if i else (DRIVER,)):
                    if pred == me:  # I am in two hops in a row: my own output, not through a socket
                        got: list[Wire] | ChainFault = local[i - 1]
                    else:
                        try:
                            got = read_frame(loop.ins[ROLE_IN, i, j])
                        except (OSError, FrameError) as exc:
                            if loop.stop or (pred is DRIVER and isinstance(exc, PeerGone)):
                                return  # stopped, or the driver closed the chain (or ended)
                            gone = True
                            got = ChainFault(pred or "driver", type(exc).__name__, str(exc), died=True)
                    if isinstance(got, ChainFault):
                        fault = fault or got
                    else:
                        parts.append(got)
                if fault is None:
                    try:
                        out = self.deliver_piped(*parts)
                        frame, local[i] = encode_wires(out), out
                    except Exception as exc:  # the host's own failure: named downstream, the loop goes on
                        fault = ChainFault(me, type(exc).__name__, str(exc))
                if fault is not None:
                    frame, local[i] = encode_fault(fault), fault
                _send(loop.outs[i], frame)
                if gone:  # the streams are out of step: tell my later hops' successors, then end
                    for k in mine[at + 1:]:
                        _send(loop.outs[k], frame)
                    _close([s for out in loop.outs.values() for s in out])
                    return


def _wire_up(loop: _Loop, *, token: bytes, me: str, hops: Hops, addresses: dict[str, tuple[str, int]],
             timeout_s: float) -> None:
    """Connect my outgoing edges, then accept exactly my expected incoming ones (bad token: closed)."""
    deadline = time.monotonic() + timeout_s
    expected: set[tuple[int, int, int]] = set()
    last = len(hops) - 1
    for i, hop in enumerate(hops):
        if me not in hop:
            continue
        expected |= {(ROLE_IN, i, j) for j, p in enumerate(hops[i - 1] if i else (DRIVER,)) if p != me}
        loop.outs[i] = []
        if i == last:
            expected.add((ROLE_OUT, i, 0))
            continue
        for succ in hops[i + 1]:
            if succ != me:
                first = hello(token, role=ROLE_IN, hop=i + 1, pred=hop.index(me))
                loop.outs[i].append(connect(addresses[succ], first, timeout_s=timeout_s))
    while expected - set(loop.ins):
        loop.listener.settimeout(max(deadline - time.monotonic(), 1e-3))
        try:
            conn, _ = loop.listener.accept()
        except TimeoutError:
            missing = sorted(expected - set(loop.ins))
            raise TimeoutError(f"host {me}: {len(missing)} chain connections missing after {timeout_s:g} s") from None
        try:
            conn.settimeout(min(HELLO_S, max(deadline - time.monotonic(), 1e-3)))
            got, *edge = read_hello(conn)
        except (OSError, FrameError):
            conn.close()
            continue
        key = (edge[0], edge[1], edge[2])
        if not hmac.compare_digest(got, token) or key not in expected or key in loop.ins:
            conn.close()  # not one of this chain's edges: refused unread
            continue
        conn.settimeout(None)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        loop.ins[key] = conn
    if last in loop.outs:
        loop.outs[last].append(loop.ins[ROLE_OUT, last, 0])  # the last hop answers the driver


def _send(sockets: list[socket.socket], frame: bytes) -> None:
    for s in sockets:
        try:
            s.sendall(frame)
        except OSError:  # that successor is gone: whoever reads it finds out (and names it)
            pass


def _close(sockets: list[socket.socket]) -> None:
    for s in sockets:
        try:
            s.close()
        except OSError:
            pass
