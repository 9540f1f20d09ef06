"""The floors the runtime is measured against, each timed per epoch on the engine's own models and batches.

- :func:`centralized_epochs`: one torch model made of the same bottoms + head (no split).
- :func:`split_epochs` with ``wire=False`` (``split_floor``): the vertical split's math alone
  (bottoms and head as separate autograd graphs, outputs and gradient handed over as numpy, one
  fused backward + optimizer step for the bottoms): what any VFL runtime must compute.
- :func:`split_epochs` with ``wire=True`` (``wire_floor``): the same math, and every step's
  messages as the protocol puts them on the wire: the epoch's opening forward request, each party's
  embedding message (its step is its round tag: no STEP record, #29.2) and the server's broadcast
  gradient built as flwr ``Message`` s (``vfl.runtime.message``), byte for byte the ``inprocess`` run's
  (``tests/engine/simulations/test_bench_floors.py`` compares them with its ledger), serialized, authenticated by
  their sender's keys (``vfl.runtime.auth``: a MAC per embedding, an Ed25519 signature on the broadcast;
  skipped with ``auth: false``), then verified and decoded by the receiver, whose numbers are the
  ones the math continues with. No hosts, nodes, transport or driver: what remains between this
  floor and the ``inprocess`` run is the runtime's own dispatch, not the protocol's wire.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from flwr.common import Message

from parties.vertical import wire as vw
from parties.vertical.party import step_config
from parties.vertical.wire import SERVER_ID
from simulations.data.source import ConfigDataSource
from vfl.data.sampling import batch_indices
from vfl.engine.engine import Engine
from vfl.engine.schema import RunConfig
from vfl.runtime import message as wire
from vfl.runtime.accel import fused_step, zero_grads
from vfl.runtime.auth import HostAuth
from vfl.runtime.message import BROADCAST, Wire
from vfl.runtime.transport.inprocess import InProcessTransport


def initial_models(cfg: RunConfig, data: ConfigDataSource) -> tuple[list[torch.nn.Module], torch.nn.Module]:
    """Copies of the bottoms and the head as the engine initializes them (same seeds)."""
    engine = Engine(cfg, InProcessTransport(), data, progress=False)
    engine.start()
    try:
        nodes = {nid: n for h in engine.transport.hosts.values() for nid, n in h.nodes.items()}  # type: ignore[attr-defined]
        return [copy.deepcopy(nodes[i].bottom) for i in sorted(nodes) if i != SERVER_ID], copy.deepcopy(nodes[SERVER_ID].head)
    finally:
        engine.transport.shutdown()


def centralized_epochs(cfg: RunConfig, data: ConfigDataSource, epochs: int) -> list[float]:
    """Train one torch model made of the same bottoms + head, same batches, no messages."""
    bottoms, head = initial_models(cfg, data)
    params = [p for b in bottoms for p in b.parameters()] + list(head.parameters())
    opt = torch.optim.SGD(params, lr=cfg.train.lr)
    shards, labels = data.partition()
    xs = [torch.as_tensor(s.x_train, dtype=torch.float32) for s in shards]
    y = torch.as_tensor(labels.y_train)
    times = []
    for epoch in range(epochs):
        t0 = time.perf_counter()
        for ids in batch_indices(num_samples=len(y), batch_size=cfg.train.batch_size, seed=cfg.seed, epoch=epoch):
            idx = torch.as_tensor(np.array(ids, dtype=np.int64))  # a writable copy (the permutation is read-only)
            fused = sum(b(x[idx]) for b, x in zip(bottoms, xs, strict=True))
            loss = torch.nn.functional.cross_entropy(head(fused), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - t0)
    return times


class _Wires:
    """The two hosts' keys (parties, server) and the step's wire: build, encode, sign -> verify, decode."""

    def __init__(self, num_parties: int, *, auth: bool) -> None:
        self.auth = auth
        self.parties = HostAuth({i: f"party{i}" for i in range(1, num_parties + 1)}, host="parties")
        self.server = HostAuth({SERVER_ID: "server"}, host="server")
        keys = {**self.parties.public_keys(), **self.server.public_keys()}
        roster = {nid: (f"node{nid}", sig, dh) for nid, (sig, dh) in keys.items()}
        self.parties.install(roster)
        self.server.install(roster)

    def send(self, message: Message, *, by: HostAuth, to: HostAuth) -> Message:
        """``message`` as its receiver gets it: serialized, authenticated, verified, decoded."""
        w = Wire.of(message)
        if not self.auth:
            return wire.decode(w.data)
        w = by.sign(int(message.metadata.src_node_id), w)
        return to.verify(w.data, wire.decode(w.data))


def split_epochs(cfg: RunConfig, data: ConfigDataSource, epochs: int, *, wire_floor: bool = False) -> list[float]:
    """Seconds per epoch of the split's math (``wire_floor``: with every step's messages, see the module doc)."""
    return split_run(cfg, data, epochs, wire_floor=wire_floor)[0]


def split_run(cfg: RunConfig, data: ConfigDataSource, epochs: int, *,
              wire_floor: bool = False) -> tuple[list[float], list[torch.nn.Module], torch.nn.Module]:
    """:func:`split_epochs`, and the trained bottoms and head."""
    bottoms, head = initial_models(cfg, data)
    times = list(split_epoch_times(cfg, data, epochs, bottoms=bottoms, head=head, wire_floor=wire_floor))
    return times, bottoms, head


def split_epoch_times(cfg: RunConfig, data: ConfigDataSource, epochs: int, *, bottoms: list[torch.nn.Module],
                      head: torch.nn.Module, wire_floor: bool = False) -> Iterator[float]:
    """Train ``bottoms`` and ``head`` (in place) epoch by epoch, yielding each epoch's seconds: a
    benchmark can interleave these epochs with a transport's (``overhead``: paired ratios)."""
    party_opts = [torch.optim.SGD(b.parameters(), lr=cfg.train.lr) for b in bottoms]
    head_opt = torch.optim.SGD(head.parameters(), lr=cfg.train.lr)
    shards, labels = data.partition()
    xs = [s.x_train for s in shards]
    wires = _Wires(len(bottoms), auth=cfg.auth) if wire_floor else None
    for epoch in range(epochs):
        steps = list(batch_indices(num_samples=len(labels.y_train), batch_size=cfg.train.batch_size, seed=cfg.seed,
                                   epoch=epoch))
        t0 = time.perf_counter()
        if wires is not None:
            _start_on_wire(wires, epoch=epoch)
        for step, ids in enumerate(steps):
            ids = np.asarray(ids, dtype=np.int64)
            outs = [b(torch.as_tensor(np.ascontiguousarray(x[ids]), dtype=torch.float32)) for b, x in zip(bottoms, xs, strict=True)]
            embs = [o.detach().numpy() for o in outs]
            if wires is not None:
                embs = _embeddings_on_wire(wires, embs, epoch=epoch, step=step)
            fused = torch.from_numpy(sum(embs[1:], embs[0].copy())).requires_grad_(True)
            loss = torch.nn.functional.cross_entropy(head(fused), torch.as_tensor(labels.y_train[ids]))
            zero_grads([head_opt])
            loss.backward()
            fused_step([head_opt])
            grad = fused.grad.numpy()  # type: ignore[union-attr]
            if wires is not None:
                grad = _gradient_on_wire(wires, grad, epoch=epoch, step=step, steps=len(steps))
            zero_grads(party_opts)
            torch.autograd.backward(outs, [torch.tensor(grad).reshape(o.shape) for o in outs])
            fused_step(party_opts)
        yield time.perf_counter() - t0


def _embeddings_on_wire(wires: _Wires, embs: Sequence[np.ndarray], *, epoch: int, step: int) -> list[np.ndarray]:
    """Each party's embedding message, as the server receives it, and the arrays it reads from them."""
    tag = wire.round_tag(epoch, step)
    out = []
    for i, e in enumerate(embs, start=1):  # as PassiveParty._send: EMB only, the step in the round tag
        m = wire.make(vw.Kind.TRAIN_FORWARD, src=i, dst=SERVER_ID, round=tag,
                      content=wire.records(**{vw.Record.EMB: wire.arrays(**{vw.Array.FLOAT: e})}))
        out.append(wire.get_array(wires.send(m, by=wires.parties, to=wires.server), vw.Record.EMB, vw.Array.FLOAT))
    return out


def _start_on_wire(wires: _Wires, *, epoch: int) -> None:
    """The epoch's opening request (forward step 0), broadcast by the server, as the parties' host receives it."""
    m = wire.make(vw.Kind.TRAIN_FORWARD, src=SERVER_ID, dst=BROADCAST, round=wire.round_tag(epoch, 0),
                  content=wire.records(**{vw.Record.STEP: step_config(epoch=epoch, step=0, forward=True)}))
    wires.send(m, by=wires.server, to=wires.parties)


def _gradient_on_wire(wires: _Wires, grad: np.ndarray, *, epoch: int, step: int, steps: int) -> np.ndarray:
    """The server's broadcast gradient (+ forward step+1), as the parties' host receives it."""
    nxt = step + 1 < steps
    m = wire.make(vw.Kind.TRAIN_FORWARD, src=SERVER_ID, dst=BROADCAST, round=wire.round_tag(epoch, step),
                  content=wire.records(**{vw.Record.GRAD: wire.arrays(**{vw.Array.GRAD: grad}),
                                          vw.Record.STEP: step_config(epoch=epoch, step=step + 1 if nxt else step,
                                                               forward=nxt, grad_step=step)}))
    return wire.get_array(wires.send(m, by=wires.server, to=wires.parties), vw.Record.GRAD, vw.Array.GRAD)
