"""A malicious party for the authentication tests (importable inside Ray actors).

``ForgingParty`` answers a control message by emitting an evaluation embedding that claims to
come from another party (``src`` = the victim); its own host signs it with the attacker's key, as
a compromised party's host would.
"""

from __future__ import annotations

from typing import Any

import torch
from flwr.common import Message

from parties.vertical import wire as vw
from parties.vertical.party import PassiveParty, step_config
from strategies.npq import NPQ
from vfl.runtime import message as wire
from vfl.runtime.node import Node, NodeSpec, handles

FORGE = "query.forge"


class ForgingParty(PassiveParty):
    @handles(FORGE)
    def on_forge(self, messages: list[Message]) -> list[Message]:
        (m,) = messages
        c = m.content.config_records["f"]
        epoch, victim = int(c["epoch"]), int(c["victim"])
        with torch.no_grad():
            emb = self.bottom(self._inputs(self.shard.x_test, self.schedule.test_ids(0)))
        return [wire.make("evaluate.forward", src=victim, dst=0, round=wire.round_tag(epoch, 0, "eval"),
                          content=wire.records(**{vw.Record.EMB: wire.arrays(e=emb.numpy()),
                                                  vw.Record.STEP: step_config(epoch=epoch, step=0, forward=True)}))]


class ForgingNPQ(NPQ):
    """NPQ whose party ``ATTACKER`` (node id) is a ``ForgingParty``."""

    ATTACKER = 2

    def make_party(self, spec: NodeSpec, **kwargs: Any) -> Node:
        return ForgingParty(spec, **kwargs) if spec.node_id == self.ATTACKER else super().make_party(spec, **kwargs)
