"""The transport interface: start hosts, deliver wires to them in parallel, checkpoint, shut down."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vfl.runtime.host import NodeBuilder
from vfl.runtime.message import Wire
from vfl.runtime.node import NodeSpec


@dataclass(frozen=True)
class Outcome:
    """How one pipelined delivery ended: ``ok`` (its wires), ``failed`` (the error) or ``pending``."""

    state: str
    wires: tuple[Wire, ...] = ()
    error: BaseException | None = None


@dataclass(frozen=True)
class HostGroup:
    """The nodes one host (actor) runs, what it reserves, and the config keys the amounts came
    from (named when the cluster cannot give them)."""

    name: str
    specs: tuple[NodeSpec, ...]
    num_cpus: float = 0.1
    num_gpus: float = 0.0
    keys: tuple[str, str] = ("transport.cpus_per_actor", "transport.gpus_per_actor")

    @property
    def node_ids(self) -> tuple[int, ...]:
        return tuple(s.node_id for s in self.specs)


class Transport(ABC):
    """Moves serialized messages between the driver and the hosts; knows nothing of algorithms."""

    kind: str = "abstract"

    @abstractmethod
    def start(self, groups: Sequence[HostGroup], build: NodeBuilder, *, threads: int = 1) -> None:
        """Create one host per group; each builds its nodes with ``build`` (data stays local)."""

    @abstractmethod
    def deliver(self, batches: dict[str, list[Wire]], *, round: str) -> dict[str, list[Wire]]:
        """Deliver wires to each named host concurrently; return each host's reply wires."""

    @abstractmethod
    def submit(self, groups: Sequence[str], parts: Sequence[Any]) -> dict[str, Any]:
        """Pipelined delivery: each host in ``groups`` gets ``parts`` (wire lists or handles of
        earlier submits) and keeps what is addressed to it; returns one handle per host."""

    @abstractmethod
    def collect(self, handles: dict[str, Any], *, round: str) -> dict[str, list[Wire]]:
        """Wait for submitted deliveries; failures surface here as typed errors."""

    @abstractmethod
    def drain(self) -> list[tuple[int, int, str, str, int, int]]:
        """The (src, dst, kind, round, nbytes, payload) of every wire produced by pipelined delivery."""

    # ---- dropouts (train.on_dropout) ------------------------------------------------------------
    def ready(self, handles: dict[str, Any], *, timeout: float | None) -> set[str]:
        """Wait up to ``timeout`` s for submitted deliveries; the names of those that finished
        (successfully or not). Fetches nothing."""
        raise NotImplementedError(f"transport {self.kind!r} cannot wait on deliveries")

    def outcome(self, handle: Any) -> Outcome:
        """Fetch a finished delivery without raising: its wires, or the error it ended with."""
        raise NotImplementedError(f"transport {self.kind!r} cannot fetch deliveries")

    def alive(self, group: str) -> bool:
        """Whether the host ``group`` still answers."""
        raise NotImplementedError(f"transport {self.kind!r} cannot probe hosts")

    def remove(self, group: str) -> None:
        """Kill the host ``group`` if it still runs and forget it (no delivery, drain or checkpoint)."""
        raise NotImplementedError(f"transport {self.kind!r} cannot remove hosts")

    @abstractmethod
    def get_state(self) -> dict[int, bytes]:
        """Checkpoint bytes of every node on every host."""

    @abstractmethod
    def set_state(self, states: dict[int, bytes]) -> None:
        """Restore node states (resume)."""

    @abstractmethod
    def restart(self, states: dict[int, bytes], *, timeout_s: float = 120.0) -> list[tuple[int, int, str, str, int, int]]:
        """Bring every host back to ``states`` after a failure: recreate dead hosts with the same
        builder, rebuild the nodes of live ones, load the states. A host that has not answered the
        reset within ``timeout_s`` (``transport.round_timeout_s``; a hung one) is treated as dead.
        Returns the ledger rows live hosts had logged since the last ``drain`` (the failed attempt's traffic)."""

    @abstractmethod
    def call(self, group: str, node_id: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """Control-plane call on one node (diagnostics, attack evaluation), outside the protocol."""

    def call_all(self, calls: Sequence[tuple[str, int, str]]) -> list[Any]:
        """Control-plane calls ``(group, node_id, method)`` on several nodes, answers in order; a
        transport with separate hosts runs them concurrently (here: one after the other)."""
        return [self.call(group, node_id, method) for group, node_id, method in calls]

    def views(self) -> dict[int, dict[str, Any]]:
        """Control plane: the recorded views of every node (``privacy.record_views``), drained."""
        return {}

    def socket_chain(self, hops: tuple[tuple[str, ...], ...]) -> Any:
        """A chain of pipelined hops over TCP sockets between the hosts (``run(wires, round=, timeout_s=)``,
        ``transport.data_plane: socket``), or None where the transport has none (then the caller submits
        hop by hop)."""
        return None

    @abstractmethod
    def host_call(self, group: str, method: str, *args: Any) -> Any:
        """Control-plane call on one host itself (authentication set-up, signing the driver's
        messages for the host's nodes); never reaches a node."""

    @abstractmethod
    def shutdown(self) -> None:
        """Stop hosts (and a local Ray started by this transport)."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
