"""``SocketChain`` and the hosts' loops (``vfl.runtime.transport.socket.host``) over real TCP sockets in this process:
the Ray calls are played by a thread pool (``_Ray``), the hosts by small ``ChainHost``s. A chain
delivers hop by hop like the task path; a connection with a wrong token is refused during set-up;
a host's exception, a lost host and a silent one are PartyFailures naming them; close stops every
loop (a stuck one's actor is killed) and ordinary calls wait for a delivery in flight (the step lock)."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import pytest

from vfl.core.errors import PartyFailure, TransportError
from vfl.runtime.message import Wire
from vfl.runtime.transport.socket.chain import SocketChain
from vfl.runtime.transport.socket.frames import ROLE_IN, hello
from vfl.runtime.transport.socket.host import ChainHost


class _RayError(Exception):
    pass


class _GetTimeoutError(_RayError):
    pass


class _Ray:
    """What SocketChain uses of Ray: ``.remote`` calls run in threads, ``get`` waits for them."""

    class exceptions:
        RayError = _RayError
        GetTimeoutError = _GetTimeoutError

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(16)
        self.killed: list[Any] = []

    def get(self, refs: Any, timeout: float | None = None) -> Any:
        if isinstance(refs, list):
            return [self.get(r, timeout) for r in refs]
        try:
            return refs.result(timeout)
        except FutureTimeout:
            raise _GetTimeoutError("timeout") from None
        except Exception as exc:
            raise _RayError(f"{type(exc).__name__}: {exc}") from exc

    def kill(self, actor: Any, no_restart: bool = True) -> None:
        self.killed.append(actor)


class _Method:
    def __init__(self, fn: Any, pool: ThreadPoolExecutor) -> None:
        self.fn, self.pool = fn, pool

    def remote(self, *args: Any, **kwargs: Any) -> Future:
        return self.pool.submit(self.fn, *args, **kwargs)


class _Actor:
    def __init__(self, host: ChainHost, pool: ThreadPoolExecutor) -> None:
        self.host, self.pool = host, pool

    def __getattr__(self, name: str) -> _Method:
        return _Method(getattr(self.host, name), self.pool)


class Host(ChainHost):
    """Appends its name to each wire's data; raises on kind "boom", sleeps on kind "slow"."""

    def __init__(self, name: str) -> None:
        self.name, self.calls, self.outbox = name, 0, []
        self.release = threading.Event()

    def deliver_piped(self, *parts: Any) -> list[Wire]:
        self.calls += 1
        wires = [w for part in parts for w in part]
        if any(w.kind == "boom" for w in wires):
            raise ValueError(f"boom at {self.name}")
        if any(w.kind == "slow" for w in wires):
            self.release.wait(30)
        out = [Wire(src=w.src, dst=w.dst, kind=w.kind, round=w.round, data=w.data + self.name.encode(),
                    payload=w.payload) for w in wires]
        self.outbox.extend(out)
        return out

    def drain_outbox(self) -> list[Wire]:
        out, self.outbox = self.outbox, []
        return out


def _chain(hops, *, dead: str = "") -> tuple[SocketChain, _Ray, dict[str, Host]]:
    ray = _Ray()
    hosts = {h: Host(h) for hop in hops for h in hop}
    actors = {h: _Actor(host, ray.pool) for h, host in hosts.items()}
    chain = SocketChain(ray, actors, hops, names=lambda h: f"<{h}>", dead=lambda: dead, setup_timeout_s=10)
    return chain, ray, hosts


def _wire(kind: str = "k", data: bytes = b"") -> Wire:
    return Wire(src=1, dst=2, kind=kind, round="train:0:0", data=data, payload=5)


def test_a_chain_runs_every_hop_in_order_and_serves_many_steps():
    hops = (("s",), ("a", "b"), ("s",), ("a", "b"))  # a SecAgg step's shape: the server twice, the parties twice
    chain, _, hosts = _chain(hops)
    try:
        for step in range(3):
            out = chain.run([_wire(data=bytes([step]))], round=f"train:0:{step}", timeout_s=10)
            # s, then a and b each get s's wire, s gets both, a and b each get both of s's
            assert [w.data for w in out] == [bytes([step]) + x for x in (b"sasa", b"sbsa", b"sasb", b"sbsb")]
        assert [hosts[h].calls for h in "sab"] == [6, 6, 6]
        assert len(hosts["s"].drain_outbox()) == 3 * 3  # every hop's replies logged where they were made
    finally:
        chain.close()
    assert all(not t.name.startswith("vfl-socket-chain") for t in threading.enumerate())


def test_a_host_in_two_hops_in_a_row_passes_its_output_to_itself():
    chain, _, _ = _chain((("a",), ("a", "b")))
    try:
        assert [w.data for w in chain.run([_wire()], round="r", timeout_s=10)] == [b"aa", b"ab"]
    finally:
        chain.close()


def test_a_host_error_is_a_party_failure_naming_that_host():
    chain, _, hosts = _chain((("s",), ("a", "b")))
    try:
        with pytest.raises(PartyFailure, match=r"party <s> failed in round train:0:4: ValueError: boom at s"):
            chain.run([_wire("boom")], round="train:0:4", timeout_s=10)
        assert chain.broken and hosts["a"].calls == 0  # downstream hosts passed the error on, unrun
        with pytest.raises(TransportError):
            chain.run([_wire()], round="r", timeout_s=10)
    finally:
        chain.close()


def test_a_lost_host_is_named_by_the_dead_callback():
    chain, ray, hosts = _chain((("s",), ("a", "b"), ("s",)), dead="<a> (dead)")
    try:
        assert ray.get(_Actor(hosts["a"], ray.pool).chain_stop.remote(chain._id)) is True  # a's sockets close
        with pytest.raises(PartyFailure, match=r"party <a> \(dead\) failed in round r: its Ray actor died"):
            chain.run([_wire()], round="r", timeout_s=10)
    finally:
        chain.close()


def test_a_silent_host_times_out_and_close_kills_it_only(monkeypatch):
    import vfl.runtime.transport.socket.chain as sc

    monkeypatch.setattr(sc, "STUCK_AFTER_S", 0.5)  # s will be stuck in its delivery: close gives up on it
    chain, ray, hosts = _chain((("s",), ("a", "b")))
    result: list[Any] = []
    calls = threading.Thread(target=lambda: result.append(hosts["s"].drain_outbox()))
    try:
        with pytest.raises(PartyFailure, match=r"party <s>, <a>, <b> failed .*round_timeout_s=0.5 \(socket chain\)"):
            chain.run([_wire("slow")], round="r", timeout_s=0.5)
        calls.start()  # an ordinary call waits for the delivery in flight (the step lock)
        calls.join(0.3)
        assert calls.is_alive() and not result
        chain.close()
        assert [a.host.name for a in ray.killed] == ["s"]  # a and b stopped; s's actor killed
    finally:
        hosts["s"].release.set()
    calls.join(10)
    assert len(result[0]) == 1  # it ran once the delivery had logged its reply


def test_a_connection_with_a_wrong_token_is_refused_during_set_up():
    host = Host("a")
    ip, port = host.chain_listen("c1")
    token = b"t" * 32
    errors: list[BaseException] = []

    def start() -> None:
        try:
            host.chain_start("c1", token=token, me="a", hops=(("a",),), addresses={"a": (ip, port)}, timeout_s=10)
        except BaseException as exc:
            errors.append(exc)

    starter = threading.Thread(target=start)
    starter.start()
    intruder = socket.create_connection((ip, port), timeout=5)
    intruder.sendall(hello(b"x" * 32, role=ROLE_IN, hop=0, pred=0))
    assert intruder.recv(1) == b""  # closed unread
    from vfl.runtime.transport.socket.frames import ROLE_OUT, encode_wires, read_frame
    from vfl.runtime.transport.socket.host import connect

    inp = connect((ip, port), hello(token, role=ROLE_IN, hop=0, pred=0), timeout_s=5)
    out = connect((ip, port), hello(token, role=ROLE_OUT, hop=0, pred=0), timeout_s=5)
    starter.join(10)
    assert not errors
    inp.sendall(encode_wires([_wire()]))
    out.settimeout(5)
    assert [w.data for w in read_frame(out)] == [b"a"]  # the real edges work
    with pytest.raises(OSError):  # set-up is over: the listener is closed
        socket.create_connection((ip, port), timeout=2)
    assert host.chain_stop("c1") is True
    inp.close()
    out.close()


def test_a_failed_set_up_is_a_party_failure_and_kills_no_actor(monkeypatch):
    def refuse(self, chain_id, **kwargs):
        raise OSError("no route to host")

    ray = _Ray()
    hosts = {h: Host(h) for h in "sab"}
    monkeypatch.setattr(hosts["b"], "chain_start", refuse.__get__(hosts["b"]))
    actors = {h: _Actor(host, ray.pool) for h, host in hosts.items()}
    with pytest.raises(PartyFailure, match="failed in round compile: socket chain set-up failed: .*no route to host"):
        SocketChain(ray, actors, (("s",), ("a", "b")), names=lambda h: f"<{h}>", dead=lambda: "", setup_timeout_s=1)
    assert ray.killed == []
    assert all(not host.__dict__.get("_chain_loops") for host in hosts.values())  # every host let go of it
