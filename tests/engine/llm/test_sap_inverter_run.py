"""SAP runs with the learned inverter, η auto and SanText: the vendor's attacks against an undefended
release (the control) and a defended one, and the report rows they give."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from simulations.report.llm import llm_leak_attack
from tests.engine.llm.test_sap_nodes import run

FAST = {"inverter_samples": 128, "inverter_epochs": 3, "aia_attribute": None}


@pytest.fixture(scope="module")
def plain():
    return run({**FAST, "eta": None})[0].summary


@pytest.fixture(scope="module")
def auto():
    return run({**FAST, "eta": "auto", "eia_target": 0.1})[0].summary


def test_learned_inverter_reads_an_undefended_release_and_the_report_lists_it(plain):
    assert plain["inverter_rate"] > 0.8 and plain["eia_rate"] == 1.0  # control: no noise, both attacks win
    rows = {r.name: r for r in llm_leak_attack(SimpleNamespace(summary=plain))}
    assert rows["learned_inversion"].value == plain["inverter_rate"] and rows["learned_inversion"].succeeded
    assert rows["embedding_inversion"].value == 1.0


def test_eta_auto_is_calibrated_and_cuts_both_attacks(plain, auto):
    assert isinstance(auto["eta"], float) and auto["eia_target"] == 0.1
    assert abs(auto["eta_calibrated_eia"] - 0.1) < 0.05  # on the public calibration sample
    assert auto["eia_rate"] < 0.35 and auto["inverter_rate"] < plain["inverter_rate"] - 0.4
    rows = {r.name: r for r in llm_leak_attack(SimpleNamespace(summary=auto))}
    assert rows["learned_inversion"].details["eta"] == auto["eta"]


def test_santext_substitutes_tokens_and_reports_its_epsilon(plain):
    """ε = 15 on MiniLM's table (nearest-token spacing ≈ 0.76) replaces part of the tokens: the vendor's
    inversion recovers about the tokens SanText kept and no more."""
    summary = run({**FAST, "eta": None, "santext_epsilon": 15.0})[0].summary
    changed = summary["santext_changed"]
    assert 0.05 < changed < 0.95
    assert summary["eia_rate"] < plain["eia_rate"] - 0.05 and summary["eia_rate"] < 1.0 - changed + 0.2
    assert summary["santext_epsilon"] == 15.0 and summary["santext_epsilon_is_guarantee"] is True  # crypto noise
    rows = {r.name: r for r in llm_leak_attack(SimpleNamespace(summary=summary))}
    assert rows["embedding_inversion"].details["santext_epsilon"] == 15.0


def test_learned_inverter_reads_a_deeper_split_where_the_relaxation_attack_fails():
    """Split 1, no noise: the optimization (relaxation) EIA at this test's 5 steps recovers little, the
    learned inverter (trained on public token sequences through the public block) nearly everything."""
    summary = run({**FAST, "eta": None, "split": 1})[0].summary
    assert summary["inverter_rate"] > 0.8 and summary["inverter_rate"] > summary["eia_rate"] + 0.4
