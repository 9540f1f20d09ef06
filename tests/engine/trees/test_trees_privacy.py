"""The trees' attacks, played on what each node kept: a passive party's instance-space label inference
succeeds on plain secureboost (the control) and is bounded by label DP and by hiding the instance spaces;
the label holder's feature-order inference reads a party's column off the splits.

The data (``tests.support.trees:two_informative``): y = 1{x0 + x1 > 0} among 22 noise columns, so trees that
follow the labels split on x0 and x1 and their instance spaces name the labels, while trees whose gradients
carry no label information (label DP at small ε) split on noise: what the attack gets beyond chance there is
the labels' leak, not the columns' structure (on breast cancer almost every column predicts the label, so
any partition of the rows does)."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from simulations.cli.runner import execute, resolve_config
from simulations.report.render import run_attacks
from simulations.report.run import load_run

BASE = ["dataset=tests.support.trees:two_informative", "params.n_estimators=8", "params.max_depth=4",
        "privacy.record_views=true", "transport.kind=inprocess"]
CLEAR = ["params.he=none", "params.allow_insecure=true"]


def _attacks(path, *extra):
    execute(resolve_config("secureboost-bc", [*BASE, *extra]), out_dir=path, progress=False)
    results, skipped = run_attacks(load_run(path), ("instance_space", "feature_order"))
    return {r.name: r for r in results}, skipped


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    return _attacks(tmp_path_factory.mktemp("plain") / "run", *CLEAR)[0]


def test_the_instance_spaces_give_the_labels_away_on_plain_secureboost(control):
    r = control["instance_space"]
    assert r.value > r.baseline + 0.2  # chance: the majority class, ~0.5


def test_the_label_holder_orders_a_partys_column_from_its_splits(tmp_path):
    got, _ = _attacks(tmp_path / "bc", *CLEAR, "dataset=breast-cancer")
    r = got["feature_order"]
    assert r.value > 0.5 and r.details["mean_rho_splits"] > 0.5 and r.details["mean_rho_histograms"] > 0.5


def test_label_dp_bounds_the_instance_space_attack(tmp_path, control):
    """At ε_label < 1 (8 trees) the attack keeps less than half the control's advantage over chance. The noise
    is seeded so the test replays (the same distribution as the crypto source; its spread over seeds: docs/trees.md)."""
    got, _ = _attacks(tmp_path / "dp", *CLEAR, "params.label_dp={noise_multiplier: 16.0, clip: 1.0}",
                      "privacy.noise_rng=seeded")
    r, c = got["instance_space"], control["instance_space"]
    assert r.details["epsilon_label"] < 1
    assert r.value - r.baseline < (c.value - c.baseline) / 2


def test_hidden_instance_spaces_leave_the_attack_at_chance(tmp_path, control):
    got, _ = _attacks(tmp_path / "hidden", "params.hide_instance_space=true", "params.n_estimators=2",
                      "params.max_depth=3", "params.max_bin=8")
    r = got["instance_space"]
    assert r.details["hide_instance_space"] and abs(r.value - r.baseline) <= 0.02
