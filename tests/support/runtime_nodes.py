"""Tiny nodes for the runtime tests (host, grid): a server and parties that answer with known arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vfl.runtime import message as wire
from vfl.runtime.node import Node, NodeSpec, handles

SERVER = 0
SERVER_SPEC = NodeSpec(SERVER, "server", "server", "server")


def party_specs(n: int, per_group: int = 2) -> list[NodeSpec]:
    return [NodeSpec(i, "party", f"party{i}", f"parties-{(i - 1) // per_group}") for i in range(1, n + 1)]


class Party(Node):
    """Answers ``train.ping`` with ``train.pong`` to the server carrying ``node_id`` float32 values."""

    def __init__(self, spec: NodeSpec) -> None:
        super().__init__(spec)
        self.pings = 0

    @handles("train.ping")
    def on_ping(self, messages):
        self.pings += len(messages)
        return [wire.make("train.pong", src=self.node_id, dst=SERVER, round=m.metadata.group_id,
                          content=wire.records(emb=wire.arrays(e=np.full(self.node_id, 1.5, np.float32))))
                for m in messages]

    @handles("train.echo")
    def on_echo(self, messages):  # never-ending ping-pong with the server
        return [wire.reply(m, "train.echo") for m in messages]

    @handles("query.to_nowhere")
    def on_nowhere(self, messages):
        return [wire.make("query.lost", src=self.node_id, dst=999, round=m.metadata.group_id) for m in messages]

    @handles("query.crash")
    def on_crash(self, messages):
        raise RuntimeError("boom")

    def state(self):
        return {"pings": self.pings}

    def load_state(self, state):
        self.pings = int(state["pings"])


class Server(Node):
    """Takes the pongs (replies nothing); echoes ``train.echo`` back forever."""

    accepts_broadcast = False

    def __init__(self, spec: NodeSpec) -> None:
        super().__init__(spec)
        self.pongs: list[int] = []

    @handles("train.pong")
    def on_pong(self, messages):
        self.pongs.extend(int(m.metadata.src_node_id) for m in messages)
        return []

    @handles("train.echo")
    def on_echo(self, messages):
        return [wire.reply(m, "train.echo") for m in messages]

    @handles("train.ping")
    def on_ping(self, messages):  # only reached when addressed to the server explicitly
        return []


def build(specs: Sequence[NodeSpec]) -> dict[int, Node]:
    """The node builder a host calls (module-level: picklable for Ray actors)."""
    return {s.node_id: (Server(s) if s.is_server else Party(s)) for s in specs}
