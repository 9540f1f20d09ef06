"""The matrix benchmark's scoring: VFLAIR's DCS, attack performance of an MSE, the grid of points."""

from __future__ import annotations

import math

import pytest

from simulations.benchmarks.matrix import STRENGTHS, attack_success, dcs, points, score


def test_dcs_is_one_at_the_ideal_defense_and_falls_with_distance():
    assert dcs(ap=0.5, mp=0.9, ap_ideal=0.5, mp_ideal=0.9) == 1.0
    assert dcs(ap=1.0, mp=0.9, ap_ideal=0.5, mp_ideal=0.9) == pytest.approx(1 / (1 + math.sqrt(0.5 * 0.25)))
    assert dcs(ap=0.5, mp=0.5, ap_ideal=0.5, mp_ideal=0.9) < dcs(ap=0.5, mp=0.8, ap_ideal=0.5, mp_ideal=0.9)


def test_an_mse_attack_succeeds_when_it_beats_its_chance_mse():
    assert attack_success("feature_reconstruction", 0.25, 1.0) == 0.75
    assert attack_success("feature_reconstruction", 2.0, 1.0) == 0.0
    assert attack_success("label_inference", 0.9, 0.6) == 0.9


def test_every_builtin_defense_runs_at_two_or_more_strengths_beside_none():
    quick = points(full=False)
    assert quick[0] == ("none", None, None)
    assert not [d for d, _, _ in points(full=False, binary=False) if d == "marvell"]
    assert {d for d, _, _ in points(full=False, binary=True)} == {"none", "marvell"}
    for name in STRENGTHS:
        assert sum(1 for d, _, _ in quick if d == name) >= 2
        assert sum(1 for d, _, _ in points(full=True) if d == name) >= 3


def test_score_ranks_a_defense_that_reaches_chance_at_full_accuracy_first():
    rows = [{"dataset": "d", "defense": "none", "strength": None, "attack": "label_inference", "value": 0.95,
             "baseline": 0.6, "test_acc": 0.9},
            {"dataset": "d", "defense": "good", "strength": 1.0, "attack": "label_inference", "value": 0.6,
             "baseline": 0.6, "test_acc": 0.9},
            {"dataset": "d", "defense": "costly", "strength": 1.0, "attack": "label_inference", "value": 0.6,
             "baseline": 0.6, "test_acc": 0.3}]
    table = score(rows)
    assert table["good"]["dcs"] == 1.0  # at chance with the undefended accuracy: the ideal point
    assert list(table) == ["good", "none", "costly"]  # 0.6 accuracy lost weighs more than 0.35 leak kept


def test_a_narrowed_grid_keeps_none_and_only_the_named_defenses():
    narrowed = points(full=False, only=("label_gp", "cae"))
    assert narrowed[0] == ("none", None, None)
    assert {d for d, _, _ in narrowed} == {"none", "label_gp", "cae"}
    assert all(e == {"kind": d, STRENGTHS[d][0]: s} for d, s, e in narrowed[1:])


def test_the_quick_grid_runs_the_attack_cae_targets_and_scores_dlg_input_as_an_mse():
    from simulations.benchmarks.matrix import QUICK_ATTACKS

    assert "gradient_inversion" in QUICK_ATTACKS  # dlg_label / idlg_label: label recovery from one gradient row
    assert attack_success("dlg_input", 0.5, 2.0) == 0.75
