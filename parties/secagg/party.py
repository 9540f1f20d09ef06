"""The SecAgg party node and the readers of SecAgg messages (counted flwr messages, ``parties.secagg.wire``);
the server node is ``parties.secagg.server``.

Set-up (once per run, again on a restart or resume = a new session; after skip-party dropouts a restart's
session holds the survivors, checked against the party's own ``SetupTerms``): the server relays public keys and
the sealed shares of every party's self-mask seed. Each round: the parties send double-masked
vectors; the server opens the round with the vectors that arrived and asks the survivors for
their round keys (``query.secagg_unmask``), and for seed shares only if a survivor vanished before
answering; then it has exactly the survivors' sum, fuses it and steps its head. With auth on
the parties sign their SecAgg keys with their identity keys (verified against the authentication
roster, not the server's); in SecAgg mode ``malicious`` each round also opens with the survivors
signing the survivor set
(``query.secagg_consistency``), whose signatures ride on the unmask request. In mode ``announced``
the parties mask over the set the server's forward request named (``Key.ANNOUNCED``, omitted while it
repeats the last one) and the server sums the vectors: no request follows the embeddings. With
``train.on_dropout: skip-party`` a round missing a dropped party's vector stays closed and its step is
skipped: the server answers with the next forward request (no gradient) naming the survivors, or an
ANNOUNCE broadcast where no forward follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from flwr.common import ConfigRecord, Message

from parties.mods.encoding import ROWS
from parties.secagg import wire as sw
from parties.vertical.party import PassiveParty
from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire
from vfl.runtime.message import parse_round, round_of, round_tag
from vfl.runtime.mods import ModContext
from vfl.runtime.node import Node, NodeSpec, handles
from vfl.secagg import Identity, Reveal, SecAggClient
from vfl.secagg.announce import decode_set, smallest_set
from vfl.secagg.consistency import MaliciousServer, tolerated


def cfg_of(message: Message) -> Any:
    """The ``sw.Record.SECAGG`` config record every secure-aggregation message carries."""
    return wire.config_of(message, sw.Record.SECAGG)


def colluders_of(c: Any) -> int | None:
    """The colluders a set-up names (the run's privacy.colluders, else t - 1); None when absent (then t - 1)."""
    declared = c.get(sw.Key.COLLUDERS)
    return None if declared is None else int(declared)


def _records(**values: Any) -> Any:
    return wire.records(**{sw.Record.SECAGG: wire.config(**values)})


def answered_round(message: Message, *, recovery_phase: str) -> str:
    """The round id an UNMASK reply answers, from its (authenticated) round tag: the tag itself, or for a
    recovery-tagged reply the round of that epoch and step in ``recovery_phase`` (#29.2: no round echo)."""
    phase, epoch, step = parse_round(round_of(message))
    return round_tag(epoch, step, recovery_phase) if phase == sw.Phase.RECOVERY else round_of(message)


def reveal_of(message: Message, *, round_id: str | None = None) -> Reveal:
    """Parse a survivor's UNMASK reply (``round_id``: the round it answers, where it carries no round key)."""
    c = cfg_of(message)
    if sw.Key.ROUND in c:  # a reply that names its round (before #29.2)
        round_id = str(c[sw.Key.ROUND])
    if round_id is None:
        raise ProtocolError(f"UNMASK reply from node {message.metadata.src_node_id} names no round")
    names = [str(n) for n in c[sw.Key.NAMES]]
    keys = [bytes(k) for k in c.get(sw.Key.PAIR_KEYS, [])]
    pairs = {int(d): {n: keys[i * len(names) + j] for j, n in enumerate(names)}
             for i, d in enumerate(c.get(sw.Key.PAIR_PARTIES, []))}
    return Reveal(round_id, dict(zip(names, [bytes(k) for k in c[sw.Key.SELF_KEYS]], strict=True)), pairs)


def announced_of(message: Message, roster: list[int] | tuple[int, ...]) -> frozenset[int] | None:
    """Mode announced: the set a forward request names for the round it asks for (None: the last one)."""
    rec = wire.record_of(message, sw.Record.SECAGG, ConfigRecord)
    if rec is None or sw.Key.ANNOUNCED not in rec:
        return None
    return decode_set(bytes(rec[sw.Key.ANNOUNCED]), roster)  # type: ignore[arg-type]


def shares_of(message: Message) -> dict[int, bytes]:
    """Parse a holder's REVEAL_SHARES reply (owner -> share)."""
    c = cfg_of(message)
    return {int(o): bytes(s) for o, s in zip(c[sw.Key.OWNERS], c[sw.Key.SEED_SHARES], strict=True)}


@dataclass(frozen=True)
class SetupTerms:
    """The SecAgg terms a party takes from its own run config (roster, threshold t, colluders, mode), never from
    the server's set-up message: a server naming a smaller t or colluders would shrink the smallest set (or
    survivor quorum) the party accepts. A set-up may leave out parties of the roster (a restart after skip-party
    dropouts sets up over the survivors): the party cannot tell a dropped party from an honest one the server
    calls dropped, so it accepts any subset holding itself and at least max(t, 2, colluders + 2) parties, the
    smallest set it would sum over in a round of the full session anyway."""

    parties: tuple[int, ...]
    threshold: int
    colluders: int
    mode: str

    def check(self, *, me: int, parties: list[int], threshold: int, colluders: int, mode: str) -> None:
        """MaliciousServer (round ``setup``) unless the set-up names these t, colluders and mode and a roster
        subset with this party and at least ``smallest_set(t, colluders)`` parties."""
        got = (tuple(sorted(parties)), int(threshold), int(colluders), str(mode))
        own = (tuple(sorted(self.parties)), self.threshold, self.colluders, self.mode)
        subset = set(got[0]) <= set(own[0]) and me in got[0] and len(got[0]) >= smallest_set(own[1], own[2])
        if got[1:] != own[1:] or not subset:
            raise MaliciousServer("setup", me, f"the set-up names parties {list(got[0])}, threshold {got[1]}, "
                                  f"colluders {got[2]}, mode {got[3]}; this party's run config says parties "
                                  f"{list(own[0])} (a subset with this party and at least "
                                  f"{smallest_set(own[1], own[2])} of them after dropouts), threshold {own[1]}, "
                                  f"colluders {own[2]}, mode {own[3]}")


class SecAggParty(PassiveParty):
    """A passive party holding a ``SecAggClient`` after the key set-up; its mods get it as
    ``ModContext.secagg`` (what ``secagg_mod`` masks with). ``terms``: its own SecAgg terms (a set-up naming
    others is refused); mode announced keeps one memory of masked inputs across its sessions (a second set-up
    must not let the server ask the same input again over another set)."""

    _secagg: SecAggClient | None = None
    _told: frozenset[int] | None = None  # mode announced: S of an ANNOUNCE, for the next round this party masks

    def __init__(self, spec: NodeSpec, *, terms: SetupTerms | None = None, row_rule: bool = True, **kwargs: Any) -> None:
        super().__init__(spec, **kwargs)
        self.terms = terms
        self.row_rule = row_rule  # no sample's row of exact codes over two sets (masked: announced; released: the others)
        self.masked_before: dict[bytes, frozenset[int]] | None = {}  # input digest -> set, over every session

    def keep_from(self, old: Node) -> None:
        """A restart rebuilds this node: it keeps the memory of masked inputs (a driver that orders a restart per
        set would otherwise ask a restored model's batch again over another set)."""
        super().keep_from(old)  # its release counts (parties/vertical/release_guard.py)
        if isinstance(old, SecAggParty) and old.masked_before is not None and self.masked_before is not None:
            self.masked_before = old.masked_before

    @property
    def client(self) -> SecAggClient:
        if self._secagg is None:
            raise ProtocolError(f"{self.spec.name}: secure aggregation used before key set-up")
        return self._secagg

    def ctx(self, phase: str, epoch: int, step: int) -> ModContext:
        ctx = super().ctx(phase, epoch, step)
        ctx.secagg = self._secagg
        return ctx

    def _send(self, request: Message, emb: torch.Tensor, phase: str, epoch: int, step: int) -> Message:
        client = self._secagg
        if client is not None and client.mode == "announced":  # accept the round's set before masking it
            told, self._told = self._told, None
            named = announced_of(request, client.parties)
            client.announce(round_id=round_tag(epoch, step, phase), members=told if named is None else named)
        if client is not None and self.row_rule:  # the samples of the rows it masks next (per-row rules, every mode)
            ids = self.schedule.test_ids(step) if phase == "eval" else self.schedule.train_ids(epoch, step)
            self.mod_state[ROWS] = [f"{'test' if phase == 'eval' else 'train'}:{int(i)}" for i in ids]
        return super()._send(request, emb, phase, epoch, step)

    @handles(sw.Kind.ANNOUNCE)
    def on_announce(self, messages: list[Message]) -> list[Message]:
        """Mode announced, skip-party: the set of this party's next round (checked when it masks that round)."""
        for m in messages:
            self._told = announced_of(m, self.client.parties)
        return []

    @handles(sw.Kind.SETUP)
    def on_setup(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        c = cfg_of(m)
        session, threshold, mode = bytes(c[sw.Key.SESSION]), int(c[sw.Key.THRESHOLD]), str(c.get(sw.Key.MODE, "semi-honest"))
        ident = Identity(*self.identity) if self.identity is not None else None  # auth on: keys are signed
        colluders = tolerated(threshold, colluders_of(c))
        if self.terms is not None:
            self.terms.check(me=self.node_id, parties=[int(p) for p in c[sw.Key.PARTIES]], threshold=threshold,
                             colluders=colluders, mode=mode)
        client = SecAggClient(self.node_id, [int(p) for p in c[sw.Key.PARTIES]], threshold, session, mode=mode,
                              identity=ident, colluders=colluders, masked_before=self.masked_before,
                              roster=len(self.terms.parties) if self.terms is not None else 0)
        self._secagg = client
        signed = {sw.Key.KEY_SIG: client.key_signature()} if ident is not None else {}
        return [wire.reply(m, src=self.node_id, content=_records(**{
            sw.Key.PUBLIC_KEY: client.public_key(), sw.Key.SESSION: session, sw.Key.THRESHOLD: threshold, sw.Key.MODE: mode,
            **signed, sw.Key.COLLUDERS: colluders}))]

    @handles(sw.Kind.ROSTER)
    def on_roster(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        c = cfg_of(m)
        ids = [int(i) for i in c[sw.Key.IDS]]
        sigs = {i: bytes(s) for i, s in zip(ids, c.get(sw.Key.KEY_SIGS, []), strict=False)}
        self.client.receive_public_keys({i: bytes(k) for i, k in zip(ids, c[sw.Key.KEYS], strict=True)}, sigs)
        if self.client.mode == "announced":  # no self mask: no seed to share, set-up ends here
            return []
        shares = self.client.make_shares()
        to = sorted(shares)
        return [wire.reply(m, sw.Kind.SHARES, src=self.node_id, content=_records(**{
            sw.Key.TO: to, sw.Key.ENVELOPES: [shares[i] for i in to]}))]

    @handles(sw.Kind.DELIVER)
    def on_deliver(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        c = cfg_of(m)
        self.client.receive_shares({int(i): bytes(e) for i, e in zip(c[sw.Key.FROM], c[sw.Key.ENVELOPES], strict=True)})
        return []

    @handles(sw.Kind.UNMASK)
    def on_unmask(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        c = cfg_of(m)
        dropped = [int(p) for p in c.get(sw.Key.DROPPED, [])]
        survivors = [int(p) for p in c[sw.Key.SURVIVORS]] if sw.Key.SURVIVORS in c else sorted(self.client.active)
        sigs = {int(p): bytes(s) for p, s in zip(c.get(sw.Key.SIG_PARTIES, []), c.get(sw.Key.SIGS, []), strict=True)}
        rv = self.client.unmask(round_id=str(c[sw.Key.ROUND]), survivors=survivors, dropped=dropped, signatures=sigs)
        names = sorted(rv.self_keys)
        gone = sorted(rv.pair_keys)
        pairs = {sw.Key.PAIR_PARTIES: gone, sw.Key.PAIR_KEYS: [rv.pair_keys[d][n] for d in gone for n in names]} if gone else {}
        return [wire.reply(m, src=self.node_id, content=_records(**{  # the round: the reply's tag (#29.2)
            sw.Key.NAMES: names, sw.Key.SELF_KEYS: [rv.self_keys[n] for n in names], **pairs}))]

    @handles(sw.Kind.CONSISTENCY)
    def on_consistency(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        c = cfg_of(m)
        sig = self.client.sign_survivors(round_id=str(c[sw.Key.ROUND]), survivors=[int(p) for p in c[sw.Key.SURVIVORS]])
        return [wire.reply(m, src=self.node_id, content=_records(**{sw.Key.ROUND: str(c[sw.Key.ROUND]), sw.Key.SIG: sig}))]

    @handles(sw.Kind.REVEAL_SHARES)
    def on_reveal_shares(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        c = cfg_of(m)
        got = self.client.reveal_shares(round_id=str(c[sw.Key.ROUND]), owners=[int(p) for p in c[sw.Key.OWNERS]])
        owners = sorted(got)
        return [wire.reply(m, src=self.node_id, content=_records(**{
            sw.Key.ROUND: str(c[sw.Key.ROUND]), sw.Key.OWNERS: owners, sw.Key.SEED_SHARES: [got[o] for o in owners]}))]
