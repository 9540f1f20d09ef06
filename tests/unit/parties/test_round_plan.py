"""The round's hop plan (parties/vertical/round_plan.py) and the SecAgg server's round state (parties/secagg/round.py)."""

from __future__ import annotations

import pytest
import torch

from parties.secagg import wire as sw
from parties.secagg.plan import secagg_round_plan
from parties.secagg.round import AWAITING, IDLE, UNMASKED, ServerRound
from parties.vertical import wire as vw
from parties.vertical.round_plan import PARTIES, SERVER, round_plan
from vfl.core.errors import ProtocolError


@pytest.mark.parametrize("secagg,mode,n", [(False, "semi-honest", 0), (True, "semi-honest", 1), (True, "malicious", 2),
                                           (True, "announced", 0)])
def test_train_plan_is_the_hop_chain_the_loops_used_to_write_out(secagg, mode, n):
    plan = secagg_round_plan(mode=mode) if secagg else round_plan()
    parties = ("p0", "p1", "p2")
    # the pattern written in three places before: server, (parties, server) per unmask hop, parties
    assert plan.targets(server="s", parties=parties) == [("s",)] + [parties, ("s",)] * n + [parties]
    assert plan.unmask_hops == n
    assert [h.next_step for h in plan.hops] == [False] * (1 + 2 * n) + [True]
    assert plan.hops[0].kind == plan.hops[-1].kind == vw.Kind.TRAIN_FORWARD
    assert all(a.dst == b.src for a, b in zip(plan.hops, plan.hops[1:], strict=False))


def test_malicious_plan_signs_the_survivors_before_unmasking():
    assert secagg_round_plan(mode="malicious").exchanges == (sw.Kind.CONSISTENCY, sw.Kind.UNMASK)
    assert secagg_round_plan().exchanges == (sw.Kind.UNMASK,)


def test_eval_plan_ends_at_the_server():
    plan = secagg_round_plan(phase="eval")
    assert plan.hops[0].kind == vw.Kind.EVAL_FORWARD
    assert plan.hops[-1].dst == SERVER and plan.hops[0].src == PARTIES
    with pytest.raises(ValueError, match="allowed: train, eval"):
        round_plan(phase="predict")


def _round(exchanges: tuple[str, ...]) -> ServerRound:
    r = ServerRound(exchanges)
    r.open(phase="train", epoch=0, step=3, messages=[])
    return r


def test_server_round_walks_its_named_states():
    r = ServerRound((sw.Kind.UNMASK,))
    assert r.state == IDLE
    with pytest.raises(ProtocolError, match="no secure-aggregation round is open"):
        r.require_open()
    r.open(phase="eval", epoch=1, step=2, messages=[])
    assert (r.state, r.phase, r.epoch, r.step) == (AWAITING, "eval", 1, 2)
    r.ask(sw.Kind.UNMASK, recovering=False)
    with pytest.raises(ProtocolError, match="outside an unmasked round"):
        r.sum()
    fused = torch.ones(2, 3)
    assert r.unmasked(fused, []) == []
    assert r.state == UNMASKED and r.sum() is fused
    r.close()
    assert r.state == IDLE and r.fused is None


def test_a_fault_free_round_that_leaves_the_plan_is_refused_and_recovery_may():
    r = _round((sw.Kind.CONSISTENCY, sw.Kind.UNMASK))
    r.ask(sw.Kind.UNMASK, recovering=False)  # skipped the consistency hop the driver submits
    with pytest.raises(ProtocolError, match="plan declares"):
        r.unmasked(torch.zeros(1), [])
    r = _round((sw.Kind.UNMASK,))
    r.ask(sw.Kind.UNMASK, recovering=True)
    r.ask(sw.Kind.REVEAL_SHARES, recovering=True)  # a survivor vanished: off-plan, via Dropouts.converse
    assert r.unmasked(torch.zeros(1), []) == [] and r.state == UNMASKED
