"""A host runs a group of nodes in one process (a Ray actor, or the driver for ``inprocess``).

Many parties share one host so that M=100 parties do not cost 100 actors. The host turns
incoming wire bytes into flwr messages, hands each node its messages (a broadcast goes to every
party node it hosts), and serializes the replies — the bytes the ledger counts. With
authentication on (``auth_begin``/``auth_roster``) it authenticates what its nodes send (a MAC per
unicast, a signature per broadcast) and verifies what they receive before they see it (``vfl.runtime.auth``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from flwr.common import Message

from vfl.core.errors import ProtocolError, VFLError
from vfl.runtime import profile
from vfl.runtime.auth import HostAuth, check_unreserved
from vfl.runtime.devices import ray_gpu_ids
from vfl.runtime.faults import FaultPlan
from vfl.runtime.message import BROADCAST, Wire, decode
from vfl.runtime.node import Node, NodeSpec, state_from_bytes, state_to_bytes
from vfl.runtime.threads import set_compute_threads
from vfl.runtime.transport.socket.host import ChainHost
from vfl.runtime.views import ViewLog

NodeBuilder = Callable[[Sequence[NodeSpec]], dict[int, Node]]


class NodeHost(ChainHost):
    """Holds nodes for the whole run; ``deliver`` is the only data path in or out. ``ChainHost``
    (``transport.data_plane: socket``) adds the socket chain's loop and its step lock."""

    def __init__(self, build: NodeBuilder, specs: Sequence[NodeSpec], threads: int = 1, *,
                 in_driver: bool = False) -> None:
        """Build the nodes of ``specs`` here (they load only their own data).

        Args:
            build: the picklable node builder (``vfl.engine.strategy.NodeFactory``); its ``view_policy``
                turns on the recording of received messages.
            specs: the nodes this host runs.
            threads: torch threads of this process (ignored in the driver).
            in_driver: an ``inprocess`` host: shares the driver's process (no thread change, no exit).
        """
        self.in_driver = in_driver  # an in-process host shares the driver: no thread change, no exit
        self.faults: FaultPlan | None = None
        if threads > 0 and not in_driver:
            set_compute_threads(threads)  # torch and the BLAS pools (vfl/runtime/threads.py)
        self.specs = list(specs)
        self.build = build
        self.outbox: list[tuple[int, int, str, str, int, int]] = []  # wires produced in pipelined mode
        self.init_error: VFLError | None = None
        policy = getattr(build, "view_policy", None)  # privacy.record_views (off: None, nothing recorded)
        self.views: ViewLog | None = ViewLog(policy) if policy is not None else None
        try:
            self.faults = FaultPlan.from_env()  # VFL_FAULT_INJECT, parsed once (None: no fault, nothing checked)
            self.nodes = self._build_nodes()
        except VFLError as exc:  # reported by ready(): Ray loses the type of errors raised in __init__
            self.nodes, self.init_error = {}, exc  # (e.g. a party's own file is bad)
        self.auth: HostAuth | None = None  # set by auth_begin: sign what my nodes send, verify what they get

    def _build_nodes(self) -> dict[int, Node]:
        nodes = self.build(self.specs)
        if self.views is not None:
            for node in nodes.values():
                node.view_sink = self.views.derive
        self._bind_identities(nodes)
        return nodes

    def _bind_identities(self, nodes: dict[int, Node]) -> None:
        """With auth and a roster: each node may sign statements as itself and verify its peers'."""
        auth = getattr(self, "auth", None)
        if auth is not None and auth.has_roster:
            for nid, node in nodes.items():
                node.identity = auth.identity(nid)

    def ready(self) -> list[int]:
        if self.init_error is not None:
            raise self.init_error
        return sorted(self.nodes)

    def reset(self, states: dict[int, bytes]) -> list[tuple[int, int, str, str, int, int]]:
        """Rebuild every node and load ``states`` (a restart: whatever a failed round left in the
        nodes is dropped); returns the outbox rows logged since the last drain."""
        rows = self.drain_outbox()
        self.faults = FaultPlan.from_env()  # a restart starts the host anew: the plan as its environment says now
        old, self.nodes = self.nodes, self._build_nodes()
        for nid, node in self.nodes.items():  # a node's own memory survives its rebuild (Node.keep_from)
            if nid in old:
                node.keep_from(old[nid])
        self.set_state(states)
        return rows

    def deliver(self, wires: Sequence[Wire]) -> list[Wire]:
        """Decode, verify (with auth), dispatch per node, encode (and sign) the replies.

        Args:
            wires: serialized messages for nodes of this host; a ``BROADCAST`` one goes to every
                party node here (``Node.accepts_broadcast``).

        Returns:
            The replies as wires, per node in order of first appearance.

        Raises:
            ProtocolError: a message for a node this host does not run, or a kind a node does not handle.
            AuthenticationError: a bad signature (with auth), before any node sees the message.
        """
        per_node: dict[int, list[Any]] = {}
        auth, nodes, views = self.auth, self.nodes, self.views
        timed = profile.enabled  # (read once: a start/stop pair per message and reply is four calls)
        for w in wires:
            message = decode(w.data)
            if auth is not None:
                t0 = profile.start() if timed else 0.0
                message = auth.verify(w.data, message)  # before any node sees it
                if timed:
                    profile.stop("auth", t0)
            dst = message.metadata.dst_node_id  # the (signed) metadata, not the routing header
            for nid in self._broadcast_ids() if dst == BROADCAST else (dst,):
                if nid not in nodes:
                    raise ProtocolError(f"message {w.kind} for node {nid} delivered to a host without it")
                per_node.setdefault(nid, []).append(message)
                if views is not None:
                    views.record(nid, message, skip=nodes[nid].unviewed)
        out: list[Wire] = []
        plan = self.faults
        for node, replies in self._handle(per_node):  # (node, its replies), in order of first appearance
            if plan is not None:
                plan.check(node.spec.name, replies, in_driver=self.in_driver)
            for r in replies:
                if auth is None:
                    out.append(Wire.of(r))
                    continue
                check_unreserved(r)  # (a node may not write the auth record itself)
                wire = Wire.of(r)
                t0 = profile.start() if timed else 0.0
                out.append(auth.sign(node.spec.node_id, wire))  # one MAC or signature, by the node that produced it
                if timed:
                    profile.stop("auth", t0)
        return out

    def _broadcast_ids(self) -> list[int]:
        """My nodes that take a ``BROADCAST`` (``Node.accepts_broadcast``)."""
        return [nid for nid, n in self.nodes.items() if n.accepts_broadcast]

    def _handle(self, per_node: dict[int, list[Message]]) -> list[tuple[Node, list[Message]]]:
        """Each node's replies, in order; nodes of one class get one ``handle_together`` call."""
        t0 = profile.start()
        nodes = self.nodes
        pairs = [(nodes[nid], messages) for nid, messages in per_node.items()]
        together = None
        if len(pairs) > 1 and len({type(n) for n, _ in pairs}) == 1:  # e.g. the parties' batched backward
            together = type(pairs[0][0]).handle_together(pairs)
        if together is None:
            together = [n.handle(messages) for n, messages in pairs]
        profile.stop("handle", t0)
        return list(zip(map(itemgetter(0), pairs), together, strict=True))

    # ---- authentication (control plane, called by the driver at setup) ------------------------
    def auth_begin(self) -> dict[int, tuple[bytes, bytes]]:
        """Generate an Ed25519 and an X25519 key for each of my nodes (kept here); return the
        public keys (node id -> (Ed25519, X25519))."""
        names = {nid: n.spec.name for nid, n in self.nodes.items()}
        label = ", ".join(names[n] for n in sorted(names)[:4]) + (", ..." if len(names) > 4 else "")
        self.auth = HostAuth(names, host=f"the host of {label}")
        return self.auth.public_keys()

    def auth_roster(self, roster: dict[int, tuple[str, bytes, bytes]]) -> None:
        """Fix the roster of every node's public keys (before the first protocol message)."""
        if self.auth is None:
            raise ProtocolError("auth_roster before auth_begin")
        self.auth.install(roster)
        self._bind_identities(self.nodes)

    def emit(self, wires: Sequence[Wire]) -> list[Wire]:
        """Sign messages the driver built for my nodes (the driver holds no key); unchanged without auth."""
        if self.auth is None:
            return list(wires)
        return [self.auth.sign_for(w) for w in wires]

    def deliver_piped(self, *parts: Sequence[Wire]) -> list[Wire]:
        """Pipelined delivery: take what is addressed to my nodes from other hosts' outputs (Ray
        passes them actor to actor, not through the driver) and log my replies for the ledger."""
        nodes = self.nodes
        mine = [w for part in parts for w in part if w.dst == BROADCAST or w.dst in nodes]
        out = self.deliver(mine)
        self.outbox.extend([(w.src, w.dst, w.kind, w.round, len(w.data), w.payload) for w in out])  # len = w.nbytes
        return out

    def drain_outbox(self) -> list[tuple[int, int, str, str, int, int]]:
        out, self.outbox = self.outbox, []
        return out

    def drain_views(self) -> dict[int, dict[str, Any]]:
        """What each of my nodes received (recorded views), forgotten here once returned."""
        return self.views.export() if self.views is not None else {}

    def get_state(self) -> dict[int, bytes]:
        return {nid: state_to_bytes(n.state()) for nid, n in self.nodes.items()}

    def set_state(self, states: dict[int, bytes]) -> None:
        for nid, data in states.items():
            if nid in self.nodes:
                self.nodes[nid].load_state(state_from_bytes(data))

    def pid(self) -> int:
        """The host's process id (benchmarks sum the RSS of the driver and every actor)."""
        return os.getpid()

    def assigned_resources(self) -> dict[str, Any]:
        """What this host may use: Ray's assigned resources (CPU, GPU...) and the GPU ids Ray gave it
        (CUDA_VISIBLE_DEVICES as Ray set it); empty outside a Ray actor."""
        gpus = ray_gpu_ids()
        if gpus is None:
            return {}
        import ray

        return {"resources": dict(ray.get_runtime_context().get_assigned_resources()), "gpu_ids": gpus,
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def profile_counters(self, reset: bool = False) -> dict[str, dict[str, float]]:
        """This process's ``vfl.runtime.profile`` accumulators (empty unless ``VFL_PROFILE=1``); ``reset`` zeroes them."""
        out = profile.counters()
        if reset:
            profile.reset()
        return out

    def call(self, node_id: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """Control-plane call on one node (attacks, diagnostics); not part of the protocol."""
        return getattr(self.nodes[node_id], method)(*args, **kwargs)
