"""In-process transport: hosts live in the driver; messages are still serialized and counted."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from vfl.errors import PartyFailure, VFLError
from vfl.host import NodeBuilder, NodeHost
from vfl.message import Wire
from vfl.transport.base import HostGroup, Transport


class InProcessTransport(Transport):
    kind = "inprocess"

    def __init__(self) -> None:
        self.hosts: dict[str, NodeHost] = {}
        self.groups: dict[str, HostGroup] = {}

    def start(self, groups: Sequence[HostGroup], build: NodeBuilder, *, threads: int = 1) -> None:
        os.environ["VFL_HOST_IN_DRIVER"] = "1"  # do not change the driver's torch thread count
        for g in groups:
            self.groups[g.name] = g
            self.hosts[g.name] = NodeHost(build, g.specs, threads)
            self.hosts[g.name].ready()  # a typed build error (bad data) surfaces here, as over Ray

    def deliver(self, batches: dict[str, list[Wire]], *, round: str) -> dict[str, list[Wire]]:
        out: dict[str, list[Wire]] = {}
        for name, wires in batches.items():
            try:
                out[name] = self.hosts[name].deliver(wires)
            except VFLError:
                raise
            except Exception as exc:
                names = ", ".join(s.name for s in self.groups[name].specs)
                raise PartyFailure(names, round, f"{type(exc).__name__}: {exc}") from exc
        return out

    def submit(self, groups: Sequence[str], parts: Sequence[Any]) -> dict[str, Any]:
        out = {}
        for name in groups:
            try:
                out[name] = self.hosts[name].deliver_piped(*parts)
            except VFLError:
                raise
            except Exception as exc:
                names = ", ".join(s.name for s in self.groups[name].specs)
                raise PartyFailure(names, "pipelined", f"{type(exc).__name__}: {exc}") from exc
        return out

    def collect(self, handles: dict[str, Any], *, round: str) -> dict[str, list[Wire]]:
        return dict(handles)

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

    def call(self, group: str, node_id: int, method: str, *args: Any, **kwargs: Any) -> Any:
        return self.hosts[group].call(node_id, method, *args, **kwargs)

    def host_call(self, group: str, method: str, *args: Any) -> Any:
        return getattr(self.hosts[group], method)(*args)

    def shutdown(self) -> None:
        self.hosts.clear()
