"""Adapters θ on the wire without resending what a model server already holds.

The client sends adapter set i with every ``train.forward``, ``train.backprop`` and ``evaluate.forward``;
most of those copies repeat what the receiving server already got (the forward and the backprop of one
step carry the same θ_i; every evaluation step of an epoch the same clean θ_i; a tensor the optimizer
did not move, e.g. lora_A at step 0 while B = 0). With ``ThetaSender`` the client sends a server only the
tensors of set i that changed (bit for bit) since that server last received set i, whole, plus a
``theta`` config record (base, version): the number of the request to that server for set i whose
copy the delta builds on, and its own number (counted per server and set, so the record tells the
server nothing about requests it did not receive). The server's ``ThetaStore`` keeps its last copy of each set and refuses a delta built on a
version it does not hold (e.g. a server rebuilt without its client) instead of computing with stale
tensors. The server's view is unchanged: at every request it holds exactly the θ_i it would have
received whole (the curious server attacks that), and the computation is bit-identical.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch
from flwr.common import ConfigRecord, Message

from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire

THETA = "theta"  # config record of a request carrying (a delta of) an adapter set: base, version
FULL = -1  # base of a delta that is the whole set (the receiver holds nothing of it)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical arrays (so −0.0 ≠ 0.0 and a NaN equals itself: exactly what a resend would carry)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)))


@dataclass
class ThetaSender:
    """Client side: the last value of every tensor of each adapter set, the set version at which each
    tensor last changed, the version of each set every server holds and the requests numbered per
    (server, set) that the wire record carries."""

    last: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    changed: dict[int, dict[str, int]] = field(default_factory=dict)
    version: dict[int, int] = field(default_factory=dict)
    held: dict[tuple[int, int], int] = field(default_factory=dict)  # (server, set) -> version it holds
    seq: dict[tuple[int, int], int] = field(default_factory=dict)  # (server, set) -> number of its last request

    def _update(self, adapter: int, tensors: Mapping[str, np.ndarray]) -> None:
        last = self.last.get(adapter)
        if last is None or set(last) != set(tensors):
            self.version[adapter] = self.version.get(adapter, FULL) + 1
            self.last[adapter] = {k: np.array(v, copy=True) for k, v in tensors.items()}
            self.changed[adapter] = {k: self.version[adapter] for k in tensors}
            return
        moved = [k for k in sorted(tensors) if not _same(last[k], tensors[k])]
        if moved:
            self.version[adapter] += 1
            for k in moved:
                last[k] = np.array(tensors[k], copy=True)
                self.changed[adapter][k] = self.version[adapter]

    def outgoing(self, *, server: int, adapter: int, tensors: Mapping[str, np.ndarray]
                 ) -> tuple[dict[str, np.ndarray], ConfigRecord]:
        """The tensors of set ``adapter`` (its value now: ``tensors``) that ``server`` lacks, and the
        ``theta`` record (base: the number of the request whose copy it holds, FULL if none; version:
        this request's number)."""
        self._update(adapter, tensors)
        key = (server, adapter)
        base = self.held.get(key, FULL)
        delta = {k: tensors[k] for k in sorted(tensors) if self.changed[adapter][k] > base}
        self.held[key] = self.version[adapter]
        prev = self.seq.get(key, FULL) if base != FULL else FULL
        self.seq[key] = prev + 1
        return delta, wire.config(base=prev, version=prev + 1)

    def forget(self) -> None:
        """Nothing is assumed held any more (after a state load: the servers may be fresh nodes)."""
        self.last, self.changed, self.version, self.held, self.seq = {}, {}, {}, {}, {}


@dataclass
class ThetaStore:
    """Server side: per (client, adapter set), the number of the last request and the whole set it held."""

    held: dict[tuple[int, int], tuple[int, dict[str, torch.Tensor]]] = field(default_factory=dict)

    def resolve(self, m: Message, *, adapter: int, received: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The whole adapter set a request stands for: ``received`` alone (no ``theta`` record: every
        request carries all of θ), else the kept copy updated with ``received``."""
        rec = wire.record_of(m, THETA, ConfigRecord)
        if rec is None:
            return received
        base, version = wire.config_int(rec, "base"), wire.config_int(rec, "version")
        key = (int(m.metadata.src_node_id), adapter)
        held, kept = self.held.get(key, (FULL, {}))
        if base != FULL and base != held:
            raise ProtocolError(f"{m.metadata.message_type}: adapter set {adapter} from node {key[0]} is a delta "
                                f"on version {base}, this server holds version {held} (a rebuilt server; "
                                "restart the run or set params.resend_adapters: true)")
        tensors = {**(kept if base != FULL else {}), **received}
        self.held[key] = (version, tensors)
        return dict(tensors)

    def forget(self) -> None:
        self.held = {}
