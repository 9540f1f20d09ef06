"""A label holder's server node with defenses, and one step of party embeddings for it (defense unit tests)."""

from __future__ import annotations

from typing import Any

import numpy as np

import strategies  # noqa: F401
from parties.vertical import wire as vw
from parties.vertical.party import step_config
from simulations.data.source import ConfigDataSource
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.runtime import message as wire
from vfl.runtime.node import NodeSpec

M, P, B = 2, 8, 32  # parties, embedding width, batch


def defended_server(defenses: list[dict[str, Any]], *, model: dict[str, Any] | None = None,
                    train: dict[str, Any] | None = None, seeded: bool = False) -> Any:
    """The npq server node on digits with ``defenses`` (seeded noise when a test twins two servers)."""
    cfg = load_run_config({"strategy": "npq", "dataset": "digits", "num_parties": M, "defenses": defenses,
                           **({"privacy": {"noise_rng": "seeded"}} if seeded else {}),
                           "model": {"embed_dim": P, **(model or {})}, "train": {"batch_size": B, **(train or {})}})
    strat = STRATEGIES.get("npq")(cfg)
    data = ConfigDataSource.from_config(cfg)
    strat.prepare(data)
    return strat.build_node(NodeSpec(0, "server", "server", "server"), data)


def forward_messages() -> list[Any]:
    """Step 0 of epoch 0: every party's embedding of the first batch (fixed random rows)."""
    rng = np.random.default_rng(0)
    return [wire.make(vw.Kind.TRAIN_FORWARD, src=i + 1, dst=0, round=wire.round_tag(0, 0),
                      content=wire.records(emb=wire.arrays(e=rng.normal(size=(B, P)).astype(np.float32)),
                                           step=step_config(epoch=0, step=0, forward=True)))
            for i in range(M)]
