"""The picklable node builder shipped to hosts: it rebuilds the strategy inside the host and asks it
for the nodes of that host (``Strategy.build_node``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from vfl.data.dataset import DataSource
from vfl.runtime.devices import with_resolved_device
from vfl.runtime.node import Node, NodeSpec
from vfl.runtime.preflight import check_device
from vfl.runtime.views import ViewPolicy


class BuildsNodes(Protocol):
    """What the factory needs of a strategy instance (``vfl.engine.strategy.Strategy`` has it)."""

    def build_node(self, spec: NodeSpec, data: DataSource) -> Node: ...


@dataclass(frozen=True)
class NodeFactory:
    """Picklable builder shipped to hosts: rebuilds the strategy there and asks it for nodes."""

    strategy_cls: Callable[[Any], BuildsNodes]  # a Strategy subclass, built from ``cfg``
    cfg: Any
    data: DataSource

    def __call__(self, specs: Sequence[NodeSpec]) -> dict[int, Node]:
        cfg = with_resolved_device(self.cfg)  # in the host: `auto` means what this actor sees
        check_device(getattr(getattr(cfg, "train", None), "device", "cpu"))
        strategy = self.strategy_cls(cfg)
        return {s.node_id: strategy.build_node(s, self.data) for s in specs}

    @property
    def view_policy(self) -> ViewPolicy | None:
        """What hosts record of received messages (``privacy.record_views``), or None (the default)."""
        return ViewPolicy.from_privacy(getattr(self.cfg, "privacy", None))
