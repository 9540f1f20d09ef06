"""A fixed chain of pipelined hops over plain TCP sockets between the host actors
(``transport.data_plane: socket``): the Ray-free data plane of a vertical training step.

``run``, ``close``, ``broken``, ``hops``. Set up once through Ray (``ChainHost.chain_listen``/``chain_start``: each host listens
on its node IP, connects to its successors, and one daemon thread per host serves the chain); a
step is then one frame from the driver to the first hop, one frame per edge between hops, one
frame from each last-hop host back. Reads block (no busy-wait), frames are ``struct``-encoded (``vfl.runtime.transport.socket.frames``: no pickle on the socket),
and every connection opens with a per-chain random token. Each hop runs the hosts'
``deliver_piped``, so wires, outbox rows and ledger counts equal the task path's.
"""

from __future__ import annotations

import secrets
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from vfl.core.errors import PartyFailure, TransportError
from vfl.runtime.message import Wire
from vfl.runtime.transport.socket.frames import (
    ROLE_IN,
    ROLE_OUT,
    TOKEN_BYTES,
    ChainFault,
    FrameError,
    PeerGone,
    encode_wires,
    hello,
    read_frame,
)
from vfl.runtime.transport.socket.host import connect

Hops = tuple[tuple[str, ...], ...]
STUCK_AFTER_S = 5.0  # on close, an actor whose loop has not ended by then (stuck in a delivery) is killed
SETUP_TIMEOUT_S = 60.0


class SocketChain:
    """``run(wires)`` sends ``wires`` through ``hops`` (each a tuple of host names) over TCP and
    returns the last hop's replies, host order."""

    def __init__(self, ray: Any, actors: dict[str, Any], hops: Hops, *, names: Callable[[str], str],
                 dead: Callable[[], str], setup_timeout_s: float = SETUP_TIMEOUT_S) -> None:
        if not hops or any(not hop for hop in hops) or any(len(set(hop)) != len(hop) for hop in hops):
            raise ValueError("a socket chain needs at least one hop, each with at least one host, none twice")
        self._ray, self.hops, self._names, self._dead = ray, hops, names, dead
        self._actors = {name: actors[name] for name in self._hosts()}
        self._id = secrets.token_hex(8)
        self._inputs: list[tuple[str, socket.socket]] = []
        self._outputs: list[tuple[str, socket.socket]] = []
        self._closed, self._started = False, False
        self.broken = False  # a step did not complete: the streams are out of step (see close)
        try:
            self._open(setup_timeout_s)
        except BaseException:
            self.broken = True
            self.close()
            raise

    def _open(self, timeout_s: float) -> None:
        ray, token = self._ray, secrets.token_bytes(TOKEN_BYTES)
        try:
            addrs = dict(zip(self._actors, ray.get([a.chain_listen.remote(self._id) for a in self._actors.values()],
                                                   timeout=timeout_s), strict=True))
            started = [a.chain_start.remote(self._id, token=token, me=name, hops=self.hops, addresses=addrs,
                                            timeout_s=timeout_s) for name, a in self._actors.items()]
            self._inputs = [(h, connect(tuple(addrs[h]), hello(token, role=ROLE_IN, hop=0, pred=0), timeout_s=timeout_s))
                            for h in self.hops[0]]
            last = len(self.hops) - 1
            self._outputs = [(h, connect(tuple(addrs[h]), hello(token, role=ROLE_OUT, hop=last, pred=0),
                                         timeout_s=timeout_s)) for h in self.hops[-1]]
            ray.get(started, timeout=timeout_s + 10.0)
            self._started = True
        except (ray.exceptions.RayError, OSError) as exc:
            raise PartyFailure(self._dead() or self._everyone(), "compile",
                               f"socket chain set-up failed: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None

    def run(self, wires: Sequence[Wire], *, round: str, timeout_s: float) -> list[Wire]:
        """The last hop's replies; a host that fails, dies or does not answer within ``timeout_s``
        is a PartyFailure naming it (the chain is then unusable: ``close`` it)."""
        if self._closed or self.broken:
            raise TransportError("socket chain used after a failed step or close (close it, build a new one)")
        try:
            return self._run(wires, round=round, timeout_s=timeout_s)
        except BaseException:
            self.broken = True
            raise

    def _run(self, wires: Sequence[Wire], *, round: str, timeout_s: float) -> list[Wire]:
        deadline = time.monotonic() + timeout_s
        frame = encode_wires(wires)
        late = f"no answer within transport.round_timeout_s={timeout_s:g} (socket chain)"
        for name, sock in self._inputs:
            try:
                sock.settimeout(max(deadline - time.monotonic(), 1e-3))
                sock.sendall(frame)
            except TimeoutError:
                raise PartyFailure(self._everyone(), round, late) from None
            except OSError:
                raise PartyFailure(self._dead() or self._names(name), round, "its Ray actor died") from None
        out: list[Wire] = []
        for name, sock in self._outputs:
            try:
                sock.settimeout(max(deadline - time.monotonic(), 1e-3))
                got = read_frame(sock)
            except TimeoutError:
                raise PartyFailure(self._everyone(), round, late) from None
            except (PeerGone, OSError):
                raise PartyFailure(self._dead() or self._names(name), round, "its Ray actor died") from None
            except FrameError as exc:
                raise PartyFailure(self._names(name), round, f"bad frame from its host: {exc}") from None
            if isinstance(got, ChainFault):
                raise self._failure(got, round)
            out.extend(got)
        return out

    def _failure(self, fault: ChainFault, round: str) -> PartyFailure:
        """A host's error frame as the PartyFailure naming that host's parties (a lost peer: the dead hosts)."""
        known = fault.host in self._actors
        if fault.died:
            return PartyFailure(self._dead() or (self._names(fault.host) if known else self._everyone()), round,
                                "its Ray actor died")
        return PartyFailure(self._names(fault.host) if known else self._everyone(), round,
                            f"{fault.type}: {fault.message}")

    def _hosts(self) -> list[str]:
        """The chain's host names, each once, in hop order."""
        return list(dict.fromkeys(h for hop in self.hops for h in hop))

    def _everyone(self) -> str:
        return ", ".join(self._names(name) for name in self._hosts())

    def close(self) -> None:
        """Stop every host's loop (the actors go back to ordinary tasks only) and close the driver's
        sockets; safe to call twice. An actor whose loop has not ended after ``STUCK_AFTER_S`` (a
        delivery that hangs) is killed: the transport then replaces it, as on the task path. After a
        failed set-up nothing is killed: a host still waiting for its connections ends at its deadline."""
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        stops = {name: a.chain_stop.remote(self._id, STUCK_AFTER_S) for name, a in self._actors.items()}
        for _, sock in self._inputs + self._outputs:
            try:
                sock.close()
            except OSError:
                pass
        deadline = time.monotonic() + STUCK_AFTER_S + 10.0
        for name, ref in stops.items():
            try:
                ended = ray.get(ref, timeout=max(deadline - time.monotonic(), 0.0))
            except ray.exceptions.GetTimeoutError:
                ended = False
            except ray.exceptions.RayError:  # the actor is dead: nothing left to stop
                continue
            if not ended and self._started:  # (a host still in a failed set-up gives up by itself)
                try:
                    ray.kill(self._actors[name], no_restart=True)
                except Exception:  # already gone
                    pass
