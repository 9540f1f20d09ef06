"""Nodes: the long-lived logic of one party or server, fed flwr messages by a host.

A node answers messages by kind: ``@handles(TRAIN_FORWARD)`` marks a method that receives every
message of that kind addressed to the node in one delivery (e.g. the server receives all M
embeddings of a step at once) and returns the replies. Nodes never see bytes or transports.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from flwr.common import Message

from vfl.core.errors import ProtocolError

SERVER, PARTY = "server", "party"
Role = Literal["server", "party"]
Handler = Callable[[Any, list[Message]], list[Message]]

__all__ = ["PARTY", "SERVER", "Handler", "Node", "NodeSpec", "handles", "state_from_bytes", "state_to_bytes"]


@dataclass(frozen=True)
class NodeSpec:
    """Where a node sits: id, role, name, and the actor group (``HostGroup``) it is packed into.

    Role ``"server"`` is the server side (the label holder, a vendor, a model server; "active
    party" in the VFL literature): party -> server traffic is ``up`` in the ledger; ``"party"`` is
    the data side. Any other role is refused (the old alias ``"hub"`` is gone: write ``"server"``)."""

    node_id: int
    role: Role
    name: str
    group: str

    def __post_init__(self) -> None:
        if self.role not in (SERVER, PARTY):
            raise ProtocolError(f"NodeSpec {self.name!r}: role must be 'server' or 'party', got {self.role!r}")

    @property
    def is_server(self) -> bool:
        """Server side (role ``"server"``)."""
        return self.role == SERVER


def handles(kind: str) -> Callable[[Handler], Handler]:
    """Mark a ``Node`` method as the handler of messages of ``kind``.

    Args:
        kind: a message kind from a protocol's vocabulary module (e.g. ``parties.vertical.wire``).

    Returns:
        The decorator; the method is called as ``method(node, messages)`` with every message of that
        kind in one delivery and returns the replies.
    """

    def deco(fn: Handler) -> Handler:
        fn.__vfl_handles__ = kind  # type: ignore[attr-defined]
        return fn

    return deco


class Node:
    """Base class: dispatches messages to ``@handles`` methods; checkpoint hooks via ``state``."""

    spec: NodeSpec
    accepts_broadcast: bool = True
    view_sink: Callable[[int, str, str, Any], None] | None = None  # set by the host when views are recorded
    identity: Any = None  # (sign, verify) of protocol statements; set by the host with auth (vfl.runtime.auth)
    unviewed: frozenset[str] = frozenset()  # array names recorded views leave out (ciphertexts it cannot read)

    def __init__(self, spec: NodeSpec) -> None:
        self.spec = spec
        self._handlers: dict[str, Handler] = {}
        for klass in reversed(type(self).__mro__):
            for attr in vars(klass).values():
                kind = getattr(attr, "__vfl_handles__", None)
                if kind is not None:
                    self._handlers[kind] = attr

    @property
    def node_id(self) -> int:
        return self.spec.node_id

    def attach(self, component: object) -> None:
        """Also serve the ``@handles`` methods of ``component`` (a protocol add-on such as sample
        alignment that works with any node class); a kind already handled is refused."""
        for klass in reversed(type(component).__mro__):
            for attr in vars(klass).values():
                kind = getattr(attr, "__vfl_handles__", None)
                if kind is None:
                    continue
                if kind in self._handlers:
                    raise ProtocolError(f"node {self.spec.name} already handles {kind!r}")
                self._handlers[kind] = _bound(component, attr)

    def handle(self, messages: list[Message]) -> list[Message]:
        """Group messages by kind (keeping order) and call the matching handlers.

        Args:
            messages: everything delivered to this node in one hop.

        Returns:
            The handlers' replies, kind by kind in order of first appearance.

        Raises:
            ProtocolError: a kind with no handler.
        """
        out: list[Message] = []
        kinds = [m.metadata.message_type for m in messages]
        by_kind: dict[str, list[Message]] = {}
        if kinds and kinds.count(kinds[0]) == len(kinds):  # one kind (a step's embeddings): one group
            by_kind[kinds[0]] = list(messages)
        else:
            for kind, m in zip(kinds, messages, strict=True):
                by_kind.setdefault(kind, []).append(m)
        for kind, group in by_kind.items():
            handler = self._handlers.get(kind)
            if handler is None:
                raise ProtocolError(f"node {self.spec.name} has no handler for message kind {kind!r}")
            out.extend(handler(self, group))
        return out

    @classmethod
    def handle_together(cls, deliveries: Sequence[tuple[Node, list[Message]]]) -> list[list[Message]] | None:
        """One delivery to several nodes of this class on one host, handled in one call (e.g. one
        fused backward pass for parties sharing a host); returns each node's replies in order, or
        None: the host calls ``handle`` node by node (the default)."""
        return None

    def note_derived(self, round: str, name: str, value: Any) -> None:
        """Record what this node computed from what it received (only when views are recorded)."""
        if self.view_sink is not None:
            self.view_sink(self.node_id, round, name, value)

    # --- checkpoints -------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to resume this node (models, optimizers, counters)."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned."""

    def keep_from(self, old: Node) -> None:
        """What this node keeps from the node it replaces when its host rebuilds it (a restart): the node's own
        memory that neither a checkpoint nor the driver may reset (a SecAgg party's masked inputs); none here."""


def _bound(component: object, fn: Callable[[Any, list[Message]], list[Message]]) -> Handler:
    """A handler of ``component`` in the node's handler table (called as ``handler(node, messages)``)."""

    def call(_node: Any, messages: list[Message]) -> list[Message]:
        return fn(component, messages)

    return call


def state_to_bytes(state: dict[str, Any]) -> bytes:
    """Checkpoint serialization (torch.save of tensors/optimizer dicts; never used on the wire)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def state_from_bytes(data: bytes) -> dict[str, Any]:
    return torch.load(io.BytesIO(data), weights_only=True)  # type: ignore[no-any-return]
