"""Split-vs-centralized oracle: NPQ over the in-process transport takes exactly the SGD steps of
one centralized model built from the same bottoms and head (sum and concat fusion)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.data.sampling import batch_indices
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport


def _engine(fusion: str, batch: int) -> tuple[Engine, BlobSource, InProcessTransport]:
    src = BlobSource(num_parties=3)
    cfg = load_run_config({"num_parties": 3, "seed": 7, "model": {"fusion": fusion, "embed_dim": 5,
                           "bottom_hidden": [8], "head_hidden": [6]},
                           "train": {"epochs": 1, "batch_size": batch, "lr": 0.05, "momentum": 0.0,
                                     "optimizer": "sgd"}})
    transport = InProcessTransport()
    return Engine(cfg, transport, src, progress=False), src, transport


def _nodes(transport: InProcessTransport):
    nodes = {nid: n for h in transport.hosts.values() for nid, n in h.nodes.items()}
    return nodes[0], [nodes[i] for i in sorted(nodes) if i != 0]


@pytest.mark.parametrize("fusion", ["sum", "concat"])
def test_npq_matches_centralized_training(fusion):
    engine, src, transport = _engine(fusion, batch=64)
    engine.start()
    server, parties = _nodes(transport)
    bottoms = [copy.deepcopy(p.bottom) for p in parties]
    head = copy.deepcopy(server.head)
    params = [q for b in bottoms for q in b.parameters()] + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.05)
    shards, labels = src.partition()
    first_grads = None
    for ids in batch_indices(num_samples=len(labels.y_train), batch_size=64, seed=7, epoch=0):
        embs = [b(torch.from_numpy(s.x_train[ids])) for b, s in zip(bottoms, shards, strict=True)]
        fused = sum(embs) if fusion == "sum" else torch.cat(embs, 1)
        loss = torch.nn.functional.cross_entropy(head(fused), torch.from_numpy(labels.y_train[ids]))
        opt.zero_grad()
        loss.backward()
        if first_grads is None:
            first_grads = [q.grad.clone() for q in params]
        opt.step()

    before = [q.detach().clone() for p in parties for q in p.bottom.parameters()] + \
             [q.detach().clone() for q in server.head.parameters()]
    engine.strategy.train_epoch(engine.grid, epoch=0, progress=lambda n=1: None)
    after = [q.detach() for p in parties for q in p.bottom.parameters()] + [q.detach() for q in server.head.parameters()]
    for ours, theirs in zip(after, params, strict=True):
        torch.testing.assert_close(ours, theirs.detach(), rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))  # training did something


def test_first_step_gradients_equal_centralized():
    """One full batch = one SGD step with lr 1: (before - after) is exactly the gradient."""
    engine, src, transport = _engine("sum", batch=10_000)
    engine.start()
    server, parties = _nodes(transport)
    for p in parties:
        for g in p.optimizer.param_groups:
            g["lr"] = 1.0
    for g in server.optimizer.param_groups:
        g["lr"] = 1.0
    modules = [p.bottom for p in parties] + [server.head]
    before = [[q.detach().clone() for q in m.parameters()] for m in modules]
    central = [copy.deepcopy(m) for m in modules]
    shards, labels = src.partition()
    ids = batch_indices(num_samples=len(labels.y_train), batch_size=10_000, seed=7, epoch=0)[0]
    fused = sum(b(torch.from_numpy(s.x_train[ids])) for b, s in zip(central[:-1], shards, strict=True))
    torch.nn.functional.cross_entropy(central[-1](fused), torch.from_numpy(labels.y_train[ids])).backward()
    engine.strategy.train_epoch(engine.grid, epoch=0, progress=lambda n=1: None)
    for m, c, b in zip(modules, central, before, strict=True):
        for q_after, q_central, q_before in zip(m.parameters(), c.parameters(), b, strict=True):
            np.testing.assert_allclose((q_before - q_after.detach()).numpy(), q_central.grad.numpy(),
                                       rtol=1e-4, atol=1e-6)


def test_sum_fusion_broadcasts_one_gradient_per_step():
    engine, src, transport = _engine("sum", batch=64)
    engine.start()
    engine.strategy.train_epoch(engine.grid, epoch=0, progress=lambda n=1: None)
    tot = engine.ledger.epoch_totals()
    steps = engine.strategy.steps_per_epoch()
    assert tot["messages_down"] == steps + 1  # start message + one broadcast per step
    assert tot["messages_up"] == steps * 3
    # the gradient payload is one B x P float32 tensor per step, not M copies
    n = len(src.partition()[1].y_train)
    assert tot["payload_down"] == n * 5 * 4
