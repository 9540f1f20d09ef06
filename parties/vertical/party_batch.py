"""One backward pass for the passive parties that share a host.

A host running several parties receives the server's gradient for all of them in one delivery.
Handled one party at a time, each party runs its own autograd backward; the engine's fixed cost
per call then dominates a small bottom's step. Here the host's parties take the gradient together:
ONE ``torch.autograd.backward`` over their (disjoint) graphs and, when their optimizers allow it, ONE
multi-tensor optimizer step (``vfl/runtime/fast/torch_step.py``; otherwise each party steps its own), then each
party, in host order, takes its local steps and its next forward pass exactly as ``PassiveParty.on_train``
does. The graphs share no tensor, so every gradient is computed by the same kernels on the same
inputs as in separate calls: parameters stay bit-identical (``tests/engine/runtime/test_party_batch.py``).
Nothing about the protocol changes: each party still builds and sends its own message. A broadcast
gradient (one array for every party) is read once per delivery and handed to each party's backward as
the same tensor (the backward only reads it).

Anything else (no gradient in the delivery, several messages for one party, DP-SGD optimizers, a
class that overrides how a gradient is applied) returns None: the host handles the parties one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import torch
from flwr.common import ArrayRecord, Message

from parties.vertical import wire as vw
from parties.vertical.local_updates import party_local_steps
from vfl.runtime import message as wire
from vfl.runtime.accel import backward, fused_step, zero_grads
from vfl.runtime.node import Node


class BatchParty(Protocol):
    """What the fused path reads and writes of a passive party (``parties.vertical.party.PassiveParty``,
    which passes its own class as ``base``: this module does not import it)."""

    local_steps: int
    shard: Any
    bottom: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: Any
    device: str
    _pending: tuple[int, int, torch.Tensor] | None
    _handlers: dict[str, Any]

    def select_gradient(self, m: Message) -> np.ndarray: ...

    def _inputs(self, x: np.ndarray, ids: np.ndarray) -> torch.Tensor: ...

    def _send(self, request: Message, emb: torch.Tensor, phase: str, epoch: int, step: int) -> Message: ...

_SAME = ("on_train", "apply_gradient", "select_gradient", "handle", "_inputs")  # what the batch path replays
_PLAIN: dict[tuple[type, type], bool] = {}  # (base, class) -> the class keeps every method of _SAME


def _plain(base: type[Node], cls: type) -> bool:
    """Whether ``cls`` replays ``base``'s methods of ``_SAME`` (checked once per class)."""
    ok = _PLAIN.get((base, cls))
    if ok is None:
        ok = _PLAIN[(base, cls)] = all(getattr(cls, name) is getattr(base, name) for name in _SAME)
    return ok


def train_together(base: type[Node], deliveries: Sequence[tuple[Node, list[Message]]]) -> list[list[Message]] | None:
    """The replies of each party (host order) to one gradient delivery, with one fused backward;
    None when the delivery is not exactly one gradient message per plain party (see module doc)."""
    parties: list[BatchParty] = []
    steps = []  # per party: (its message's step record as read, output, gradient)
    on_train, kind = base.__dict__["on_train"], vw.Kind.TRAIN_FORWARD
    plain: type | None = None  # the last class found plain (a host's parties share one: checked once)
    read, fields = None, (0, 0, 0, False)  # the last message read and its step record (a broadcast: read once)
    epoch, grad_step, broadcast = 0, 0, False
    g: Any = None  # the last gradient tensor (a broadcast: one for every party of the host, on one device)
    g_of, g_device = None, ""  # the message and device it was made for
    for node, messages in deliveries:  # every check before anything changes: None leaves the parties as they were
        party: BatchParty = node  # type: ignore[assignment]  # (checked next; a cast() call per party costs)
        if (cls := type(node)) is not plain:
            if not issubclass(cls, base) or not _plain(base, cls):
                return None
            plain = cls
        if (len(messages) != 1 or party._handlers.get(kind) is not on_train
                or getattr(party.optimizer, "begin_step", None) is not None):
            return None
        m = messages[0]
        if m is not read:  # a broadcast: the same message for every party, checked and read once
            if m.metadata.message_type != kind or not wire.has_array(m, vw.Record.GRAD):
                return None
            cfg: Any = wire.config_of(m, vw.Record.STEP)  # (values of the fields below are ints and a bool)
            read, fields = m, (int(cfg[vw.Key.EPOCH]), int(cfg[vw.Key.STEP]), int(cfg[vw.Key.GRAD_STEP]),
                               bool(cfg[vw.Key.FORWARD]))
            epoch, grad_step, broadcast = fields[0], fields[2], _broadcast_grad(m)
        pending = party._pending
        if pending is None or pending[0] != epoch or pending[1] != grad_step:
            return None  # let the one-by-one path raise its ProtocolError
        out = pending[2]
        # one broadcast array for every party of the host: one tensor, shared (backward only reads it)
        if m is not g_of or not broadcast or party.device != g_device or g.shape != out.shape:  # (g_of: g is set)
            g = torch.tensor(party.select_gradient(m), dtype=torch.float32, device=party.device).reshape(out.shape)
            g_of, g_device = m, party.device
        parties.append(party)  # an instance of `base`, checked above
        steps.append((fields, out, g))
    optimizers = [party.optimizer for party in parties]
    zero_grads(optimizers)
    backward([s[1] for s in steps], [s[2] for s in steps])  # disjoint graphs: one engine run
    stepped = fused_step(optimizers)  # one multi-tensor step when the optimizers allow (vfl/runtime/fast/torch_step.py)
    replies: list[list[Message]] = []
    ids_of: Message | None = None  # the message and schedule the batch ids were read for: once per delivery
    ids_sched: Any = None
    ids: Any = None
    for party, (_, (m,)), ((epoch, step, grad_step, forward), _, g) in zip(parties, deliveries, steps, strict=True):
        if not stepped:
            party.optimizer.step()
        party._pending = None
        if party.local_steps > 1:  # FedBCD Q > 1 (the call and its closure cost ~1 us a party otherwise)
            party_local_steps(bottom=party.bottom, optimizer=party.optimizer, grad=g, extra=party.local_steps - 1,
                              inputs=_batch(party, epoch, grad_step))
        if not forward:
            replies.append([])
            continue
        bottom = party.bottom
        if bottom.training is not True:  # = set_mode(party.bottom, training=True), without its call
            bottom.train(True)
        if m is not ids_of or party.schedule is not ids_sched:  # parties sharing a message and a schedule
            ids_of, ids_sched, ids = m, party.schedule, party.schedule.train_ids(epoch, step)
        out = bottom(party._inputs(party.shard.x_train, ids))
        party._pending = (epoch, step, out)
        replies.append([party._send(m, out, "train", epoch, step)])
    return replies


def _broadcast_grad(m: Message) -> bool:
    """The message carries one gradient for every party (``select_gradient`` returns it whatever the index)."""
    rec = wire.record_of(m, vw.Record.GRAD, ArrayRecord)
    return rec is not None and vw.Array.GRAD in rec


def _batch(node: BatchParty, epoch: int, step: int) -> Callable[[], torch.Tensor]:
    """The inputs of the batch a gradient belongs to (for the local steps)."""
    return lambda: node._inputs(node.shard.x_train, node.schedule.train_ids(epoch, step))
