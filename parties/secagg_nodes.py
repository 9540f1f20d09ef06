"""Vertical-FL nodes that run secure aggregation: key set-up over messages, masked sums at the server.

Set-up (once per run, re-run on resume = re-key): the server sends the session id; each party
answers with its X25519 public key; the server broadcasts the roster of keys; each party answers
with its Shamir shares sealed per recipient; the server relays each party the shares addressed to
it. After that every embedding a party sends is masked mod 2^k and the server only learns the sum.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from flwr.common import Message

from parties.mods.encoding import read_encoded
from parties.vertical import ActiveServer, PassiveParty
from vfl import message as wire
from vfl.errors import ProtocolError
from vfl.message import BROADCAST
from vfl.node import handles
from vfl.secagg import SecAggClient, SecAggServer

KEYS, ROSTER, SHARES, DELIVER = "query.secagg_keys", "query.secagg_roster", "query.secagg_shares", "query.secagg_deliver"
SA = "sa"


def _cfg(message: Message) -> Any:
    try:
        return message.content.config_records[SA]
    except KeyError:
        raise ProtocolError(f"{message.metadata.message_type} without the {SA!r} record") from None


class SecAggParty(PassiveParty):
    """A passive party holding a ``SecAggClient`` in its mod state (used by ``secagg_mod``)."""

    @handles(KEYS)
    def on_keys(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        c = _cfg(m)
        client = SecAggClient(self.node_id, [int(p) for p in c["parties"]], int(c["threshold"]), bytes(c["session"]))
        self.mod_state["secagg"] = client
        return [wire.reply(m, src=self.node_id, content=wire.records(**{SA: wire.config(
            pk=client.public_key(), session=bytes(c["session"]), threshold=int(c["threshold"]))}))]

    @handles(ROSTER)
    def on_roster(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        c = _cfg(m)
        client: SecAggClient = self.mod_state["secagg"]
        client.receive_public_keys({int(i): bytes(k) for i, k in zip(c["ids"], c["keys"], strict=True)})
        shares = client.make_shares()
        to = sorted(shares)
        return [wire.reply(m, SHARES, src=self.node_id, content=wire.records(**{SA: wire.config(
            to=to, env=[shares[i] for i in to])}))]

    @handles(DELIVER)
    def on_deliver(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        c = _cfg(m)
        self.mod_state["secagg"].receive_shares({int(i): bytes(e) for i, e in zip(c["frm"], c["env"], strict=True)})
        return []


class SecAggActiveServer(ActiveServer):
    """The active party: relays set-up messages and unmasks only the SUM of the parties' vectors."""

    def __init__(self, *args: Any, k: int, decode_sum: Callable[[np.ndarray, int], torch.Tensor],
                 **kwargs: Any) -> None:
        super().__init__(*args, aggregate=self._masked_aggregate, **kwargs)
        self.k = k
        self.decode_sum = decode_sum  # (sum of the integers, number of parties summed) -> head input
        self.public_keys: dict[int, bytes] = {}
        self.secagg: SecAggServer | None = None

    @handles(KEYS)
    def on_keys(self, messages: list[Message]) -> list[Message]:
        if sorted(int(m.metadata.src_node_id) for m in messages) != self.party_ids:
            raise ProtocolError("secure-aggregation set-up needs a public key from every party")
        cfgs = [_cfg(m) for m in messages]
        session, threshold = bytes(cfgs[0]["session"]), int(cfgs[0]["threshold"])
        self.public_keys = {int(m.metadata.src_node_id): bytes(c["pk"]) for m, c in zip(messages, cfgs, strict=True)}
        self.secagg = SecAggServer(self.party_ids, threshold, self.k, session)
        ids = sorted(self.public_keys)
        return [wire.make(ROSTER, src=self.node_id, dst=BROADCAST, round=messages[0].metadata.group_id,
                          content=wire.records(**{SA: wire.config(ids=ids, keys=[self.public_keys[i] for i in ids])}))]

    @handles(SHARES)
    def on_shares(self, messages: list[Message]) -> list[Message]:
        inbox: dict[int, tuple[list[int], list[bytes]]] = {pid: ([], []) for pid in self.party_ids}
        for m in messages:
            c = _cfg(m)
            for to, env in zip(c["to"], c["env"], strict=True):
                inbox[int(to)][0].append(int(m.metadata.src_node_id))
                inbox[int(to)][1].append(bytes(env))
        tag = messages[0].metadata.group_id
        return [wire.make(DELIVER, src=self.node_id, dst=pid, round=tag,
                          content=wire.records(**{SA: wire.config(frm=frm, env=env)}))
                for pid, (frm, env) in inbox.items()]

    def _masked_aggregate(self, messages: list[Message]) -> torch.Tensor:
        if self.secagg is None:
            raise ProtocolError("masked embeddings arrived before the secure-aggregation set-up")
        masked: dict[int, np.ndarray] = {}
        shape: tuple[int, ...] = ()
        for m in messages:
            enc = read_encoded(m)
            if not enc.masked or enc.k != self.k:
                raise ProtocolError(f"node {m.metadata.src_node_id} sent an unmasked or {enc.k}-bit vector; "
                                    f"expected {self.k}-bit masked values")
            masked[int(m.metadata.src_node_id)] = enc.values.ravel()
            shape = enc.values.shape
        total = self.secagg.aggregate(masked, round_id=messages[0].metadata.group_id, name="emb",
                                      public_keys=self.public_keys)
        return self.decode_sum(np.asarray(total).reshape(shape), len(messages))
