"""attacks.png encodes leakage direction: red only for an attack that beats chance, whichever way its
metric points; a failed attack with a large metric (a reconstruction error) is not the tallest red bar."""

from __future__ import annotations

from simulations.report import figures
from simulations.report.results import AttackResult


def _results() -> list[AttackResult]:
    return [
        AttackResult("label_inference", "accuracy", 0.93, 0.5),                          # leaks (higher = worse)
        AttackResult("feature_reconstruction", "mse", 4.0, 1.0, higher_is_better_attack=False),  # fails: error 4x
        AttackResult("membership_loss", "auc", 0.51, 0.5),                               # no better than chance
        AttackResult("audit", "epsilon", 3.0, 0.0),                                      # its own figure
    ]


def test_only_attacks_that_beat_chance_are_red_and_direction_is_named(tmp_path):
    bars = {b["name"]: b for b in figures.attack_bars(_results())}
    assert set(bars) == {"label_inference", "feature_reconstruction", "membership_loss"}
    red = [b for b in bars.values() if b["colour"] == figures.LEAK]
    assert [b["name"] for b in red] == ["label_inference"]
    tallest = max(bars.values(), key=lambda b: b["value"])
    assert tallest["name"] == "feature_reconstruction" and tallest["colour"] == figures.NO_LEAK  # control: the
    # old figure drew every attack bar red, so this failed attack was the tallest red bar
    assert bars["feature_reconstruction"]["leaks"] == "down" and bars["label_inference"]["leaks"] == "up"
    path = figures.attacks(_results(), tmp_path)
    assert path is not None and (tmp_path / "attacks.png").stat().st_size > 0


def test_an_attack_at_chance_is_blue_and_one_without_a_number_is_not_drawn():
    bars = figures.attack_bars([AttackResult("extraction", "agreement", 0.5, 0.5, details={})])
    assert bars[0]["colour"] == figures.NO_LEAK  # equal to chance: a verdict (False), not red
    assert figures.attack_bars([AttackResult("x", "m", float("nan"), 0.5)]) == []  # not drawn at all
