"""The fault-injection hook (a testing aid): its grammar, and a host 'dying' with its unsent replies."""

from __future__ import annotations

import pytest

from vfl.core.errors import ConfigError
from vfl.runtime import faults
from vfl.runtime import message as wire


def test_grammar() -> None:
    assert faults.parse_faults("party2@0:5") == (faults.Fault("party2", "train:0:5"),)
    assert faults.parse_faults(" a@eval:1:2/query.secagg_unmask!hang , b@3:4!exit") == (
        faults.Fault("a", "eval:1:2", "query.secagg_unmask", "hang"), faults.Fault("b", "train:3:4"))
    for bad in ("party2", "party2@x:1", "p@1:2!boom", "@1:2", "p@1:2:3:4"):
        with pytest.raises(ConfigError) as info:
            faults.parse_faults(bad)
        assert info.value.key == faults.FAULT_ENV


def test_a_host_in_the_driver_dies_with_its_unsent_replies(monkeypatch: pytest.MonkeyPatch) -> None:
    mine = wire.make("train.forward", src=3, dst=0, round="train:0:5")
    other = wire.make("train.forward", src=3, dst=0, round="train:0:4")
    monkeypatch.delenv(faults.FAULT_ENV, raising=False)
    assert faults.FaultPlan.from_env() is None  # no fault configured: a host holds no plan and never checks
    monkeypatch.setenv(faults.FAULT_ENV, "party2@0:5")
    plan = faults.FaultPlan.from_env()
    assert plan is not None
    plan.check("party1", [mine], in_driver=True)  # another node
    plan.check("party2", [other], in_driver=True)  # another round
    with pytest.raises(faults.InjectedCrash) as info:
        plan.check("party2", [mine], in_driver=True)
    assert info.value.replies == [mine]
    faults.FaultPlan(faults.parse_faults("party2@0:5/query.secagg_unmask")).check("party2", [mine], in_driver=True)
    with pytest.raises(ConfigError, match="ray transport"):
        faults.FaultPlan(faults.parse_faults("party2@0:5!hang")).check("party2", [mine], in_driver=True)


def test_a_bad_plan_is_one_line_before_any_host_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.FAULT_ENV, "party2@x:1")
    with pytest.raises(ConfigError, match="VFL_FAULT_INJECT"):
        faults.FaultPlan.from_env()
