"""The SecAgg server node: the active party that relays the key set-up and unmasks only the SUM of the parties'
vectors (``vfl.secagg.server`` holds the protocol state; ``parties.secagg.round`` the open round's exchanges).

Each round it opens the vectors that arrived and asks the survivors for their round keys (and seed shares only if
a survivor vanished; mode malicious first collects their signatures on the survivor set); in mode ``announced``
it names the next round's set in its forward request and only sums. The party side: ``parties.secagg.party``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from flwr.common import Message

from parties.mods.encoding import read_encoded
from parties.secagg import wire as sw
from parties.secagg.decoders import SumDecoder
from parties.secagg.party import (
    _records,
    answered_round,
    cfg_of,
    colluders_of,
    reveal_of,
    shares_of,
)
from parties.secagg.plan import secagg_round_plan
from parties.secagg.round import ServerRound
from parties.vertical import wire as vw
from parties.vertical.party import ActiveServer, step_config
from parties.vertical.round_plan import RoundPlan
from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire
from vfl.runtime.message import BROADCAST, parse_round, round_of, round_tag
from vfl.runtime.node import handles
from vfl.secagg import ConsistencyRequest, SecAggServer, ShareRequest, UnmaskRequest
from vfl.secagg.announce import RoundSkipped, encode_set

__all__ = ["SecAggActiveServer"]


class SecAggActiveServer(ActiveServer):
    """The active party: relays set-up messages and unmasks only the SUM of the parties' vectors."""

    def __init__(self, *args: Any, decoder: SumDecoder, plan: RoundPlan | None = None, **kwargs: Any) -> None:
        super().__init__(*args, aggregate=self._unmasked_sum, **kwargs)
        self.k = decoder.k  # bits per element on the wire
        self.decoder = decoder  # (sum of the integers, number of parties summed) -> head input (parties/secagg/decoders.py)
        self.plan = plan  # the strategy's round plan; None: the plan of the mode the set-up names
        self.public_keys: dict[int, bytes] = {}
        self.secagg: SecAggServer | None = None
        self.round = ServerRound(plan.exchanges if plan is not None else ())
        self.roster = len(self.party_ids)  # the run's parties (a restart's session may hold only the survivors)

    @handles(sw.Kind.SETUP)
    def on_setup(self, messages: list[Message]) -> list[Message]:
        if sorted(int(m.metadata.src_node_id) for m in messages) != self.party_ids:
            raise ProtocolError("secure-aggregation set-up needs a public key from every party")
        cfgs = [cfg_of(m) for m in messages]
        session, threshold = bytes(cfgs[0][sw.Key.SESSION]), int(cfgs[0][sw.Key.THRESHOLD])
        mode = str(cfgs[0].get(sw.Key.MODE, "semi-honest"))
        self.public_keys = {int(m.metadata.src_node_id): bytes(c[sw.Key.PUBLIC_KEY])
                            for m, c in zip(messages, cfgs, strict=True)}
        sigs = {int(m.metadata.src_node_id): bytes(c[sw.Key.KEY_SIG]) for m, c in zip(messages, cfgs, strict=True)
                if sw.Key.KEY_SIG in c}
        self.secagg = SecAggServer(self.party_ids, threshold, self.k, session, mode=mode,
                                   colluders=colluders_of(cfgs[0]), roster=self.roster)
        exchanges = secagg_round_plan(mode=mode).exchanges
        if self.plan is not None and self.plan.exchanges != exchanges:
            raise ProtocolError(f"secure-aggregation set-up in mode {mode!r} needs the exchanges {list(exchanges)}; "
                                f"the round plan declares {list(self.plan.exchanges)}")
        self.round = ServerRound(exchanges)
        ids = sorted(self.public_keys)
        signed = {sw.Key.KEY_SIGS: [sigs[i] for i in ids]} if set(sigs) == set(ids) else {}
        return [wire.make(sw.Kind.ROSTER, src=self.node_id, dst=BROADCAST, round=round_of(messages[0]),
                          content=_records(**{sw.Key.IDS: ids, sw.Key.KEYS: [self.public_keys[i] for i in ids], **signed}))]

    @handles(sw.Kind.SHARES)
    def on_shares(self, messages: list[Message]) -> list[Message]:
        inbox: dict[int, tuple[list[int], list[bytes]]] = {pid: ([], []) for pid in self.party_ids}
        for m in messages:
            c = cfg_of(m)
            for to, env in zip(c[sw.Key.TO], c[sw.Key.ENVELOPES], strict=True):
                inbox[int(to)][0].append(int(m.metadata.src_node_id))
                inbox[int(to)][1].append(bytes(env))
        tag = round_of(messages[0])
        return [wire.make(sw.Kind.DELIVER, src=self.node_id, dst=pid, round=tag, content=_records(**{sw.Key.FROM: frm, sw.Key.ENVELOPES: env}))
                for pid, (frm, env) in inbox.items()]

    @handles(vw.Kind.DROP)
    def on_drop(self, messages: list[Message]) -> list[Message]:
        """Mode announced: the SecAgg server learns the parties that left (skip-party), to skip their rounds."""
        before = set(self.party_ids)
        out = super().on_drop(messages)
        if self.secagg is not None and self.secagg.mode == "announced":
            self.secagg.drop(before - set(self.party_ids))
        return out

    def _skipped(self, src: Message, *, phase: str, epoch: int, step: int) -> list[Message]:
        """Mode announced, skip-party: the round stays closed and its step has no update. The reply: the next
        step's forward request without a gradient, naming the survivors; where no forward follows (last step,
        evaluation) an ANNOUNCE broadcast names them for the parties' next round."""
        self.last_summed = []  # nothing was summed (the driver's dropout record, the accountant)
        members = self._server().next_announcement()
        told = {sw.Record.SECAGG: wire.config(**{sw.Key.ANNOUNCED: encode_set(members, self._server().parties)})
                } if members is not None else {}
        nxt = phase == "train" and step + 1 < self.schedule.steps
        out = []
        if phase == "train":
            cfg = step_config(epoch=epoch, step=step + 1 if nxt else step, forward=nxt, grad_step=step)
            out.append(wire.make(vw.Kind.TRAIN_FORWARD, src=self.node_id, dst=BROADCAST, round=round_of(src),
                                 content=wire.records(**{vw.Record.STEP: cfg, **(told if nxt else {})})))
        if told and not nxt:
            out.append(wire.make(sw.Kind.ANNOUNCE, src=self.node_id, dst=BROADCAST, round=round_of(src),
                                 content=wire.records(**told)))
        return out

    # ---- rounds ---------------------------------------------------------------------------------
    def train_step(self, messages: list[Message], epoch: int, step: int) -> list[Message]:
        out = super().train_step(messages, epoch, step)
        if self.secagg is not None and self.secagg.mode == "announced" and (
                members := self.secagg.next_announcement()) is not None:  # the next round's set, only when it changes
            mask = encode_set(members, self.secagg.parties)
            for m in out:
                m.content.config_records[sw.Record.SECAGG] = wire.config(**{sw.Key.ANNOUNCED: mask})
        return out

    @handles(vw.Kind.TRAIN_FORWARD)
    def on_train(self, messages: list[Message]) -> list[Message]:
        epoch, step = self._check_round(messages, "train")
        return self._open_round(messages, phase="train", epoch=epoch, step=step)

    @handles(vw.Kind.EVAL_FORWARD)
    def on_eval(self, messages: list[Message]) -> list[Message]:
        epoch, step = self._check_round(messages, "eval")
        return self._open_round(messages, phase="eval", epoch=epoch, step=step)

    @handles(sw.Kind.UNMASK)
    def on_unmask(self, messages: list[Message]) -> list[Message]:
        self.round.require_open()  # the round is the server's open one; each reply's tag must name it (#29.2)
        r = self.round
        rnd = round_tag(r.epoch, r.step, r.phase)
        reveals = {int(m.metadata.src_node_id): reveal_of(m, round_id=answered_round(m, recovery_phase=r.phase))
                   for m in messages}
        return self._next(self._server().add_unmask(rnd, reveals))

    @handles(sw.Kind.CONSISTENCY)
    def on_consistency(self, messages: list[Message]) -> list[Message]:
        rnd = str(cfg_of(messages[0])[sw.Key.ROUND])
        return self._next(self._server().add_signatures(rnd, {int(m.metadata.src_node_id): bytes(cfg_of(m)[sw.Key.SIG])
                                                              for m in messages}))

    @handles(sw.Kind.REVEAL_SHARES)
    def on_reveal_shares(self, messages: list[Message]) -> list[Message]:
        rnd = str(cfg_of(messages[0])[sw.Key.ROUND])
        self._server().add_shares(rnd, {int(m.metadata.src_node_id): shares_of(m) for m in messages})
        return self._next(None)

    def _server(self) -> SecAggServer:
        if self.secagg is None:
            raise ProtocolError("masked vectors arrived before the secure-aggregation set-up")
        return self.secagg

    def _open_round(self, messages: list[Message], *, phase: str, epoch: int, step: int) -> list[Message]:
        masked: dict[int, np.ndarray] = {}
        for m in messages:
            enc = read_encoded(m)
            if not enc.masked or enc.k != self.k:
                raise ProtocolError(f"node {m.metadata.src_node_id} sent an unmasked or {enc.k}-bit vector; "
                                    f"expected {self.k}-bit masked values")
            masked[int(m.metadata.src_node_id)] = enc.values
        rnd = round_of(messages[0])
        try:
            request = self._server().open_round(masked, round_id=rnd, name=vw.Record.EMB)
        except RoundSkipped:  # announced, skip-party: a dropped party's vector is missing
            return self._skipped(messages[0], phase=phase, epoch=epoch, step=step)
        self.round.open(phase=phase, epoch=epoch, step=step, messages=messages)
        return self._next(request)

    def _next(self, request: UnmaskRequest | ShareRequest | ConsistencyRequest | None) -> list[Message]:
        """The next request to the parties, or (round complete) the head's step on the unmasked sum."""
        self.round.require_open()
        if request is None:
            return self._step()
        return [self._ask(request)]

    def _ask(self, request: UnmaskRequest | ShareRequest | ConsistencyRequest) -> Message:
        """The request message for the parties (recovery-tagged once a party dropped)."""
        if isinstance(request, ConsistencyRequest):
            return self._request(sw.Kind.CONSISTENCY, request.round_id, bool(request.dropped), **{
                sw.Key.ROUND: request.round_id, sw.Key.SURVIVORS: list(request.survivors)})
        if isinstance(request, UnmaskRequest):
            signed = {sw.Key.SURVIVORS: list(request.survivors), sw.Key.SIG_PARTIES: [p for p, _ in request.signatures],
                      sw.Key.SIGS: [s for _, s in request.signatures]} if request.signatures else {}
            if not request.dropped:  # everyone arrived: "all of you" needs no list
                return self._request(sw.Kind.UNMASK, request.round_id, False, **{sw.Key.ROUND: request.round_id, **signed})
            return self._request(sw.Kind.UNMASK, request.round_id, True, **{
                sw.Key.ROUND: request.round_id, sw.Key.SURVIVORS: list(request.survivors),
                sw.Key.DROPPED: list(request.dropped), **signed})
        return self._request(sw.Kind.REVEAL_SHARES, request.round_id, True, **{
            sw.Key.ROUND: request.round_id, sw.Key.OWNERS: list(request.owners)})

    def _step(self) -> list[Message]:
        """The round is unmasked: the head's train or eval step on the decoded sum, then no round."""
        r = self.round
        rnd = round_of(next(iter(r.messages.values())))
        try:
            total, summed = self._server().result(rnd)
            messages = r.unmasked(self.decoder(total, len(summed)), list(summed))
            if r.phase == "train":
                return self.train_step(messages, r.epoch, r.step)
            return self.eval_step(messages, r.step)
        finally:
            r.close()

    def _request(self, kind: str, rnd: str, recovering: bool, **values: Any) -> Message:
        self.round.ask(kind, recovering=recovering)
        _, epoch, step = parse_round(rnd)
        tag = round_tag(epoch, step, sw.Phase.RECOVERY) if recovering else rnd
        return wire.make(kind, src=self.node_id, dst=BROADCAST, round=tag, content=_records(**values))

    def _unmasked_sum(self, messages: list[Message]) -> torch.Tensor:
        return self.round.sum()
