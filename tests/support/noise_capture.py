"""Run a vertical strategy in-process and record what the server node received (its own view),
plus the parties' clean embeddings and the batch order (ground truth, for scoring attacks only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from flwr.common import Message

import strategies  # noqa: F401
from parties.vertical.party import ActiveServer, PassiveParty
from tests.support.helpers import BlobSource
from vfl.data.sampling import Schedule
from vfl.engine.engine import Engine, EngineResult
from vfl.engine.schema import RunConfig, load_run_config
from vfl.runtime.message import parse_round
from vfl.runtime.transport.inprocess import InProcessTransport

Key = tuple[int, str, int, int]  # (party node id, phase, epoch, step)


@dataclass
class Capture:
    cfg: RunConfig
    result: EngineResult
    transport: InProcessTransport
    received: dict[Key, Message] = field(default_factory=dict)  # what the server node was sent
    truth: dict[Key, np.ndarray] = field(default_factory=dict)  # clean embeddings before the mods
    order: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)  # (epoch, step, batch ids)

    def nodes(self) -> dict[int, Any]:
        return {nid: n for h in self.transport.hosts.values() for nid, n in h.nodes.items()}

    @property
    def server(self) -> ActiveServer:
        node = self.nodes()[0]
        assert isinstance(node, ActiveServer)
        return node


def vertical_config(strategy: str, noise_rng: str, *, seed: int = 5, params: dict[str, Any] | None = None,
                    epochs: int = 1) -> RunConfig:
    return load_run_config({"strategy": strategy, "num_parties": 3, "seed": seed,
                            "model": {"embed_dim": 6, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": epochs, "batch_size": 60, "lr": 0.05},
                            "privacy": {"noise_rng": noise_rng}, "params": params or {}})


def run_and_capture(cfg: RunConfig, **engine_kw: Any) -> Capture:
    """One in-process run; the spies only copy, they change nothing."""
    transport = InProcessTransport()
    received: dict[Key, Message] = {}
    truth: dict[Key, np.ndarray] = {}
    order: list[tuple[int, int, tuple[int, ...]]] = []
    real_handle, real_send, real_ids = ActiveServer.handle, PassiveParty._send, Schedule.train_ids

    def handle(self: ActiveServer, messages: list[Message]) -> list[Message]:
        for m in messages:
            if "emb" in m.content.array_records:
                phase, epoch, step = parse_round(m.metadata.group_id)
                received[(int(m.metadata.src_node_id), phase, epoch, step)] = m
        return real_handle(self, messages)

    def send(self: PassiveParty, request: Message, emb: Any, phase: str, epoch: int, step: int) -> Message:
        truth[(self.node_id, phase, epoch, step)] = emb.detach().cpu().numpy().copy()
        return real_send(self, request, emb, phase, epoch, step)

    def train_ids(self: Schedule, epoch: int, step: int) -> np.ndarray:
        ids = real_ids(self, epoch, step)
        order.append((epoch, step, tuple(int(i) for i in ids)))
        return ids

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ActiveServer, "handle", handle)
        mp.setattr(PassiveParty, "_send", send)
        mp.setattr(Schedule, "train_ids", train_ids)
        result = Engine(cfg, transport, BlobSource(num_parties=cfg.num_parties), progress=False, **engine_kw).run()
    return Capture(cfg, result, transport, received, truth, order)
