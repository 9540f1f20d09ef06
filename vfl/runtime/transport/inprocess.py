"""In-process transport: hosts live in the driver; messages are still serialized and counted.

Pipelined deliveries behave like Ray object refs: a host that fails yields a ``Failed`` handle,
deliveries that depend on it fail without running, and the error surfaces at ``collect``. A host
'dies' only through the fault-injection hook (``vfl.runtime.faults``); it is then refused until ``restart``
replaces it with a fresh host built from its specs (as Ray replaces a dead actor: it starts empty).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vfl.core.errors import PartyFailure, VFLError
from vfl.runtime.faults import InjectedCrash
from vfl.runtime.host import NodeBuilder, NodeHost
from vfl.runtime.message import Wire
from vfl.runtime.transport.base import HostGroup, Outcome, Transport


@dataclass(frozen=True)
class Failed:
    """A pipelined delivery that failed (the in-process stand-in for a failed Ray object ref)."""

    error: VFLError


class InProcessTransport(Transport):
    kind = "inprocess"

    def __init__(self) -> None:
        self.hosts: dict[str, NodeHost] = {}
        self.groups: dict[str, HostGroup] = {}
        self.dead: dict[str, InjectedCrash] = {}
        self.threads = 0  # torch intra-op threads the driver computed with (0 = not started)
        self._build: NodeBuilder | None = None
        self._restore_threads: Callable[[], None] | None = None

    def start(self, groups: Sequence[HostGroup], build: NodeBuilder, *, threads: int = 1) -> None:
        """Hosts in the driver; the driver computes with ``threads`` torch threads until ``shutdown``
        (``train.driver_threads``, else ``train.threads_per_actor``; torch's default was every core)."""
        from vfl.runtime.threads import set_compute_threads

        if threads > 0:
            restore = set_compute_threads(threads)  # torch and the BLAS pools numpy/scikit-learn use
            self._restore_threads = self._restore_threads or restore  # the first settings come back at shutdown
            self.threads = threads
        self._build = build
        for g in groups:
            self.groups[g.name] = g
            self.hosts[g.name] = NodeHost(build, g.specs, threads, in_driver=True)
            self.hosts[g.name].ready()

    def _names(self, name: str) -> str:
        return ", ".join(s.name for s in self.groups[name].specs)

    def _run(self, name: str, round: str, call: Any) -> list[Wire]:
        if name in self.dead:
            raise PartyFailure(self._names(name), round, "its host died")
        try:
            return call()  # type: ignore[no-any-return]
        except InjectedCrash as crash:
            self.dead[name] = crash
            raise PartyFailure(self._names(name), round, "its host died") from crash
        except VFLError:
            raise
        except Exception as exc:
            raise PartyFailure(self._names(name), round, f"{type(exc).__name__}: {exc}") from exc

    def deliver(self, batches: dict[str, list[Wire]], *, round: str) -> dict[str, list[Wire]]:
        return {name: self._run(name, round, lambda name=name, wires=wires: self.hosts[name].deliver(wires))
                for name, wires in batches.items()}

    def submit(self, groups: Sequence[str], parts: Sequence[Any]) -> dict[str, Any]:
        failed = None
        for p in parts:  # (a loop: a generator per hop costs more than the one or two parts it reads)
            if isinstance(p, Failed):
                failed = p
                break
        out: dict[str, Any] = {}
        for name in groups:
            if failed is not None:  # a failed input: like Ray, the delivery fails without running
                out[name] = failed
                continue
            try:
                out[name] = self._run(name, "pipelined", lambda name=name: self.hosts[name].deliver_piped(*parts))
            except VFLError as exc:
                out[name] = Failed(exc)
        return out

    def collect(self, handles: dict[str, Any], *, round: str) -> dict[str, list[Wire]]:
        failures = [h.error for h in handles.values() if isinstance(h, Failed)]
        if failures:
            if self.dead:
                raise PartyFailure(", ".join(self._names(n) for n in self.dead), round, "its host died")
            raise failures[0]
        return dict(handles)

    def ready(self, handles: dict[str, Any], *, timeout: float | None) -> set[str]:
        return set(handles)  # deliveries run synchronously in submit

    def outcome(self, handle: Any) -> Outcome:
        return Outcome("failed", error=handle.error) if isinstance(handle, Failed) else Outcome("ok", tuple(handle))

    def alive(self, group: str) -> bool:
        return group in self.hosts and group not in self.dead

    def remove(self, group: str) -> None:
        self.hosts.pop(group, None)

    def late_replies(self, group: str) -> list[Any]:
        """Messages a host had computed but never sent when it died (tests: late vectors)."""
        crash = self.dead.get(group)
        return crash.replies if crash is not None else []

    def drain(self) -> list[tuple[int, int, str, str, int, int]]:
        return [row for h in self.hosts.values() for row in h.drain_outbox()]

    def get_state(self) -> dict[int, bytes]:
        states: dict[int, bytes] = {}
        for host in self.hosts.values():
            states.update(host.get_state())
        return states

    def set_state(self, states: dict[int, bytes]) -> None:
        for host in self.hosts.values():
            host.set_state(states)

    def restart(self, states: dict[int, bytes], *, timeout_s: float = 120.0) -> list[tuple[int, int, str, str, int, int]]:
        """Live hosts rebuild their nodes in place (``NodeHost.reset``: a node keeps its own memory,
        ``Node.keep_from``); a dead one is replaced by a new host built from its group's specs, which
        starts empty like a new Ray actor (what the dead host logged is lost with it). A removed host
        (a dropped party) stays removed. Returns the live hosts' outbox rows."""
        rows = []
        for name in list(self.hosts):
            if name not in self.dead:
                rows.extend(self.hosts[name].reset(states))
                continue
            if self._build is None:
                raise RuntimeError("InProcessTransport.restart before start")
            ids = set(self.groups[name].node_ids)
            host = NodeHost(self._build, self.groups[name].specs, self.threads, in_driver=True)
            host.ready()
            host.set_state({k: v for k, v in states.items() if k in ids})
            self.hosts[name] = host
            del self.dead[name]
        return rows

    def call(self, group: str, node_id: int, method: str, *args: Any, **kwargs: Any) -> Any:
        return self.hosts[group].call(node_id, method, *args, **kwargs)

    def views(self) -> dict[int, dict[str, Any]]:
        return {nid: v for h in self.hosts.values() for nid, v in h.drain_views().items()}

    def host_call(self, group: str, method: str, *args: Any) -> Any:
        return getattr(self.hosts[group], method)(*args)

    def shutdown(self) -> None:
        self.hosts.clear()
        if self._restore_threads is not None:  # a library caller gets its own thread settings back
            self._restore_threads()
            self._restore_threads = None
