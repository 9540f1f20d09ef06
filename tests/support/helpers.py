"""Small shared test helpers: an in-memory data source with a known vertical split."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vfl.data.dataset import Dataset, LabelShard, PartyShard


@dataclass(frozen=True)
class BlobSource:
    """Gaussian blobs split into contiguous feature blocks (deterministic, no files)."""

    num_parties: int = 3
    features: int = 12
    num_train: int = 240
    num_test: int = 60
    classes: int = 3
    seed: int = 0

    def dataset(self) -> Dataset:
        rng = np.random.default_rng(self.seed)
        centers = rng.normal(0, 2, size=(self.classes, self.features))
        n = self.num_train + self.num_test
        y = rng.integers(0, self.classes, size=n)
        x = (centers[y] + rng.normal(0, 1, size=(n, self.features))).astype(np.float32)
        return Dataset("blobs", x[: self.num_train], y[: self.num_train].astype(np.int64), x[self.num_train:],
                       y[self.num_train:].astype(np.int64), self.classes)

    def partition(self) -> tuple[list[PartyShard], LabelShard]:
        d = self.dataset()
        cols = np.array_split(np.arange(self.features), self.num_parties)
        shards = [PartyShard(i, d.x_train[:, c], d.x_test[:, c]) for i, c in enumerate(cols)]
        return shards, LabelShard(d.y_train, d.y_test, self.classes)


def run_with_states(cfg: Any, *, num_train: int, transport: Any = None
                    ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[int, dict[str, Any]]]:
    """Run ``cfg`` on blobs; summary, history and every node's ``state()`` (models + optimizer state)."""
    from vfl.engine.engine import Engine
    from vfl.runtime.transport.inprocess import InProcessTransport

    transport = transport or InProcessTransport()
    engine = Engine(cfg, transport, BlobSource(num_parties=cfg.num_parties, num_train=num_train), progress=False)
    try:
        res = engine.run()
        assert engine.grid is not None
        states = {nid: transport.call(group, nid, "state") for nid, group in engine.grid.group_of.items()}
        return res.summary, res.history, states
    finally:
        transport.shutdown()


def state_tensors(states: dict[int, dict[str, Any]]) -> list[Any]:
    """Every tensor of every node's state dicts, node order (for bit-for-bit comparisons of two runs)."""
    import torch

    return [t for nid in sorted(states) for st in states[nid].values() if isinstance(st, dict)
            for t in st.values() if isinstance(t, torch.Tensor)]


class ChainSpy:
    """Counts the runs of the chains a transport hands out from its ``method`` (``socket_chain``), wrapping
    each chain's ``run`` once."""

    def __init__(self, transport: Any, method: str = "socket_chain") -> None:
        self.runs = 0
        inner = getattr(transport, method)

        def chain(hops: Any) -> Any:
            c = inner(hops)  # the transport keeps one chain per hop plan: wrap its run once
            if getattr(c, "_spied", False):
                return c
            c._spied, run = True, c.run

            def counted(*a: Any, **k: Any) -> Any:
                self.runs += 1
                return run(*a, **k)
            c.run = counted
            return c
        setattr(transport, method, chain)
