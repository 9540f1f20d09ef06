"""The report's "beats chance" comes with a 95 % interval (issue 48): Wilson for counts, a paired bootstrap for
means over the same samples as their baseline, a bootstrap of the AUC against 0.5. The control is the issue's
case: an AUC of 0.534 on 450 against 450 rows, which the old 10 % rule called a leak against the never-seen
control's 0.479, is inside the spread of chance."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.report import intervals
from simulations.report.results import AttackResult


def test_wilson_matches_the_textbook_values():
    ci = intervals.wilson(1, 8)
    assert (ci.low, ci.high) == (pytest.approx(0.0224, abs=1e-4), pytest.approx(0.4709, abs=1e-4))
    assert intervals.wilson(32, 32).high == 1.0 and intervals.wilson(32, 32).low == pytest.approx(0.8928, abs=1e-4)
    assert "n=8" in ci.method


def test_a_paired_interval_excludes_the_baseline_only_when_the_difference_is_real():
    rng = np.random.default_rng(0)
    base = rng.normal(1.0, 0.3, 500)
    better = base - 0.1 + rng.normal(0, 0.05, 500)  # an MSE attack 0.1 below its mean guess on every sample
    ci = intervals.paired(better, base, seed="t")
    assert ci.high < base.mean() and ci.contains(better.mean())
    noise = base + rng.normal(0, 0.05, 500)  # no better than the baseline
    assert intervals.paired(noise, base, seed="t").contains(base.mean())
    assert intervals.paired(better, base, seed="t") == ci  # seeded: the report is the same every time


def test_the_membership_auc_of_the_issue_is_no_verdict_of_leakage_any_more():
    rng = np.random.default_rng(0)
    members, non = rng.normal(0.1, 1, 450), rng.normal(0, 1, 450)
    ci = intervals.auc(members, non, seed="t")
    wins = (members[:, None] > non[None, :]).mean()
    assert wins == pytest.approx(0.534, abs=1e-3) and ci.contains(wins) and ci.contains(0.5)
    assert AttackResult("membership_loss", "auc", wins, 0.479).succeeded is True  # the old rule, old baseline
    now = AttackResult("membership_loss", "auc", wins, 0.5, ci=ci)
    assert now.succeeded is False and now.verdict_basis == "95 % interval"
    strong = intervals.auc(rng.normal(1, 1, 450), non, seed="t")
    assert AttackResult("membership_loss", "auc", 0.76, 0.5, ci=strong).succeeded is True
    assert now.to_json()["ci95"] == [ci.low, ci.high] and "450 members" in now.to_json()["ci_method"]
