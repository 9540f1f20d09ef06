"""Shared driver-side secure-aggregation set-up and the checks every SecAgg strategy needs."""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any

import numpy as np
import torch
from flwr.common import Message

from parties.mods import read_encoded
from parties.secagg import wire as sw
from parties.secagg.decoders import SumDecoder
from parties.secagg.party import SecAggParty, SetupTerms
from parties.secagg.plan import secagg_round_plan
from parties.secagg.server import SecAggActiveServer
from parties.vertical.party import ActiveServer, PassiveParty
from parties.vertical.round_plan import RoundPlan, round_plan
from parties.vertical.wire import SERVER_ID, party_node_id
from strategies.base.vertical import VerticalStrategy
from vfl.config.fields import param
from vfl.core.errors import ConfigError
from vfl.engine.schema import RunConfig
from vfl.runtime import message as wire
from vfl.runtime.grid import Grid
from vfl.runtime.message import BROADCAST
from vfl.runtime.node import Node, NodeSpec
from vfl.secagg import MODES, new_session_id
from vfl.secagg.consistency import check_mode, quorum, tolerated

SETUP_ROUND = wire.round_tag(0, 0, "setup")


def check_secagg_config(cfg: RunConfig, *, threshold: int, mode: str = "semi-honest") -> None:
    """SecAgg needs additive fusion, at least two parties, a threshold in [0, M-1] and, in mode
    malicious, authentication (the identity keys that sign the SecAgg keys)."""
    check_mode(mode)
    if mode == "malicious" and not cfg.auth:
        raise ConfigError("params.secagg_mode", "malicious needs auth: true (identity keys sign the SecAgg keys "
                          "and survivor sets); allowed with auth: false: semi-honest")
    if cfg.model.fusion != "sum":
        raise ConfigError("model.fusion", f"secure aggregation reveals only the SUM of the embeddings; "
                          f"fusion must be 'sum', got {cfg.model.fusion!r}")
    if cfg.num_parties < 2:
        raise ConfigError("num_parties", "secure aggregation needs at least 2 parties")
    if threshold > cfg.num_parties - 1:
        raise ConfigError("params.threshold", f"got {threshold}; allowed: 0 (auto) or [1, {cfg.num_parties - 1}]")


def secagg_colluders(cfg: RunConfig, *, threshold: int) -> int:
    """The colluders c every mode guards against: ``privacy.colluders``, else t - 1 (what the threshold tolerates).
    Each party reveals (or masks over) no set under max(t, 2, c + 2) parties; with c <= M - 2 (``privacy.colluders``)
    and t <= M - 1 the whole roster always reaches it."""
    return tolerated(threshold, cfg.privacy.colluders)


def threshold_param() -> Any:
    """``params.threshold`` of every SecAgg strategy: one definition, one help text."""
    return param(0, ge=0, help="Shamir threshold for dropout recovery (0 = ceil(2(M-1)/3))")


def secagg_mode_param() -> Any:
    """``params.secagg_mode`` of every SecAgg strategy: one definition, one help text."""
    return param("semi-honest", choices=MODES, help="SecAgg threat model: semi-honest, malicious "
                 "(signed keys + survivor consistency check; needs auth) or announced (the server names each "
                 "round's set before masking: no unmask exchange; a dropout costs the epoch attempt, or with "
                 "train.on_dropout: skip-party the round's step)")


def shamir_threshold(num_parties: int, threshold: int) -> int:
    """The configured threshold, or ceil(2(M-1)/3) when 0 (survives a third of the peers dropping)."""
    return threshold or max(1, math.ceil(2 * (num_parties - 1) / 3))


def run_key_setup(grid: Grid, *, num_parties: int, threshold: int, colluders: int, mode: str = "semi-honest") -> None:
    """Public keys -> roster -> sealed seed shares -> delivery, counted messages in the 'setup' phase. The session
    is over the parties still in the run (a restart after skip-party dropouts: the survivors) with the run's t;
    each party refuses fewer than max(t, 2, colluders + 2) (``SetupTerms``)."""
    ids = [p for p in (party_node_id(i) for i in range(num_parties)) if p in grid.party_ids]
    setup: dict[str, bytes | int | str | list[int]] = {sw.Key.SESSION: new_session_id(), sw.Key.PARTIES: ids,
                                                       sw.Key.THRESHOLD: shamir_threshold(num_parties, threshold), sw.Key.MODE: mode}
    setup[sw.Key.COLLUDERS] = int(colluders)  # every party checks it against its own (SetupTerms)
    start = wire.make(sw.Kind.SETUP, src=SERVER_ID, dst=BROADCAST, round=SETUP_ROUND,
                      content=wire.records(**{sw.Record.SECAGG: wire.config(**setup)}))
    grid.run_until_quiet([start])


class SecureSumStrategy(VerticalStrategy):
    """A vertical strategy whose parties send integers that the server sums: under secure
    aggregation (masked, only the sum revealed) or, when ``uses_secagg`` is off, in the clear.
    Subclasses set ``k`` (bits per element) and ``sum_decoder`` (integer sum -> head input, a frozen value
    the server node applies: ``parties/secagg/decoders.py``)."""

    uses_secagg: bool = True
    party_class: type[SecAggParty] = SecAggParty  # the node classes a subclass may swap (an audit, an attack)
    server_class: type[SecAggActiveServer] = SecAggActiveServer
    exact_codes: bool = True  # codes are a function of the input (no noise): the per-row rules (mask: announced; release)

    @property
    @abstractmethod
    def k(self) -> int:
        """Bits per element on the wire (the integers' width; 2^k > the largest sum)."""

    def epsilon_assumptions(self) -> list[str]:
        """What SecAgg guarantees next to the ε: no single input opens to the server with up to c colluders (c =
        ``privacy.colluders``, else t - 1); in ``semi-honest`` and ``announced`` the ε also assumes a server that
        keeps the protocol (a lying one learns sums of fewer parties, >= 2 of them honest; docs/secagg.md)."""
        if not self.uses_secagg:
            return []
        t = shamir_threshold(self.cfg.num_parties, self.params.threshold)
        c = secagg_colluders(self.cfg, threshold=t)
        q = quorum(t, c)
        held = (f"SecAgg opens no single input to the server with up to {c} colluding part{'y' if c == 1 else 'ies'} "
                f"(privacy.colluders{'' if self.cfg.privacy.colluders is not None else ' undeclared: t - 1'}, "
                f"t = {t}; each party reveals nothing for fewer than {q} parties)")
        if self.secagg_mode == "malicious":
            return [held]
        if self.secagg_mode == "announced":
            return [f"the server announces every party still in the run in each SecAgg round (params.secagg_mode: "
                    f"announced; a lying server that announces smaller sets learns sums of >= {q} parties of one "
                    "round, at least 2 of them honest)", held]
        return [f"the server keeps the SecAgg survivor protocol (params.secagg_mode: semi-honest; a server that "
                f"tells parties different survivor sets can learn sums of >= {q} parties, at least 2 of them honest; "
                "malicious detects it)", held]

    def replayable(self) -> bool:
        """A SecAgg sum that starts short of parties (skip-party dropouts earlier) is not replayed by a redo
        after a resume, which sums every party again: under seeded noise the two sums differ by the missing
        parties' counts, so the short attempt is written fresh (charged)."""
        return not self.uses_secagg or self.dropouts.active == self.cfg.num_parties

    @property
    def secagg_mode(self) -> str:
        """``semi-honest``, ``malicious`` or ``announced`` (``params.secagg_mode``)."""
        return str(getattr(self.params, "secagg_mode", "semi-honest"))

    def round_plan(self, phase: str = "train") -> RoundPlan:
        """Secure aggregation adds one round trip per round (the survivors reveal round keys), the
        malicious mode a second one before it (the survivors sign the survivor set), announced none."""
        return secagg_round_plan(phase=phase, mode=self.secagg_mode) if self.uses_secagg else round_plan(phase=phase)

    @property
    @abstractmethod
    def sum_decoder(self) -> SumDecoder:
        """How the server turns the integer sum of the parties' vectors into the head's input."""

    def _plain_sum(self, messages: list[Message]) -> torch.Tensor:
        total = sum(read_encoded(m).values.astype(np.int64) for m in messages)
        return self.sum_decoder(np.asarray(total), len(messages))

    def make_server(self, spec: NodeSpec, **kwargs: Any) -> Node:
        if self.uses_secagg:
            return self.server_class(spec, decoder=self.sum_decoder, plan=self.round_plan(), **kwargs)
        return ActiveServer(spec, aggregate=self._plain_sum, **kwargs)

    def party_terms(self) -> SetupTerms | None:
        """A party's own SecAgg terms, from its run config (None without SecAgg): a set-up naming others is
        refused; ``vfl verify`` derives a party's worst-case bound from them too."""
        if not self.uses_secagg:
            return None
        m = self.cfg.num_parties
        t = shamir_threshold(m, self.params.threshold)
        return SetupTerms(parties=tuple(party_node_id(i) for i in range(m)), mode=self.secagg_mode,
                          threshold=t, colluders=secagg_colluders(self.cfg, threshold=t))

    def make_party(self, spec: NodeSpec, **kwargs: Any) -> PassiveParty:
        terms = self.party_terms()
        if terms is None:
            return PassiveParty(spec, **kwargs)
        return self.party_class(spec, terms=terms, row_rule=self.exact_codes, **kwargs)

    def setup(self, grid: Grid) -> None:
        self.dropouts.renotify(grid)  # a restart: the rebuilt server learns again who left (skip-party)
        if self.uses_secagg:
            t = shamir_threshold(self.cfg.num_parties, self.params.threshold)
            run_key_setup(grid, num_parties=self.cfg.num_parties, threshold=self.params.threshold,
                          mode=self.secagg_mode, colluders=secagg_colluders(self.cfg, threshold=t))

    def bits_per_element(self) -> int:
        return self.k
