"""The VFLAIR attacks on real (in-process) two-party digits runs, each beside its control.

Model completion succeeds on an undefended run (its bottom beats its raw features) and falls back
under gradient noise and on random labels; the active variant beats the passive one; GRN beats the
mean guess and not with the predictions shuffled; the non-targeted backdoors cost accuracy on a
trained model and nothing on one at chance.
"""

from __future__ import annotations

import json

import pytest

import strategies  # noqa: F401
from simulations.cli.main import main
from simulations.cli.runner import execute, resolve_config
from simulations.report.inference_time import grn_feature_inference_attack
from simulations.report.render import RUN_ATTACKS, load_run

pytestmark = [pytest.mark.usefixtures("one_thread")]

NEW = ("passive_model_completion", "active_model_completion", "grn_feature_inference", "noisy_samples",
       "missing_features")


def _run(out, *, dataset="digits", defenses=(), attack=None):
    cfg = resolve_config({"name": "vflair", "dataset": dataset, "num_parties": 2, "strategy": "npq",
                          "transport": {"kind": "inprocess"},
                          "model": {"bottom_hidden": [64], "embed_dim": 16, "head": "linear"},
                          "train": {"epochs": 8, "batch_size": 100, "lr": 0.05, "momentum": 0.9},
                          "privacy": {"record_views": True}, "defenses": list(defenses), "attack": attack or {}})
    execute(cfg, out_dir=out, progress=False)
    return load_run(out)


def _attack(run, name):
    return RUN_ATTACKS.get(name, "attack")(run)[0]


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("honest"))


@pytest.fixture(scope="module")
def random_labels(tmp_path_factory):
    """Control: labels independent of the features (the trained model is at chance)."""
    return _run(tmp_path_factory.mktemp("random"), dataset="tests.support.random_digits:shuffled_labels")


def test_passive_completion_beats_the_raw_features_and_falls_back_under_gradient_noise_and_random_labels(
        honest, random_labels, tmp_path):
    pmc = _attack(honest, "passive_model_completion")
    assert pmc.value > pmc.baseline + 0.05, (pmc.value, pmc.baseline)  # the trained bottom carries the labels
    noisy = _attack(_run(tmp_path, defenses=[{"kind": "grad_noise", "scale": 0.05}]), "passive_model_completion")
    assert noisy.value - noisy.baseline < (pmc.value - pmc.baseline) / 2, (noisy.value, noisy.baseline)
    rand = _attack(random_labels, "passive_model_completion")
    assert rand.value < rand.details["majority_rate"] + 0.1


def test_active_completion_beats_the_same_party_when_honest_and_falls_back_under_gradient_noise(honest, tmp_path):
    with pytest.raises(Exception, match="attack.amc_party"):
        _attack(honest, "active_model_completion")  # Skipped: nobody armed
    armed = {"amc_party": 0, "amc_scale": 4.0}
    amc = _attack(_run(tmp_path / "amc", attack=armed), "active_model_completion")
    passive_same_party = _attack(honest, "passive_model_completion").details["parties"]["party0"]
    assert amc.value > amc.baseline + 0.1
    assert amc.value > amc.details["passive_same_run"] + 0.08  # the honest party of the same run learns less
    assert amc.value > passive_same_party, (amc.value, passive_same_party)  # and so did this party when honest
    noisy = _attack(_run(tmp_path / "noisy", attack=armed, defenses=[{"kind": "grad_noise", "scale": 0.05}]),
                    "active_model_completion")
    assert noisy.value - noisy.baseline < (amc.value - amc.baseline) / 2, (noisy.value, noisy.baseline)


def test_grn_beats_the_mean_guess_and_not_with_shuffled_predictions(honest):
    grn = _attack(honest, "grn_feature_inference")
    assert grn.value < 0.9 * grn.baseline, (grn.value, grn.baseline)
    control = grn_feature_inference_attack(honest, control=True)[0]
    assert control.value > grn.baseline, control.value


def test_non_targeted_backdoors_cost_accuracy_on_a_trained_model_and_nothing_at_chance(honest, random_labels):
    for name, least in (("missing_features", 0.05), ("noisy_samples", 0.05)):
        hit, chance = _attack(honest, name), _attack(random_labels, name)
        assert hit.value > least and hit.details["clean_acc"] > 0.9, (name, hit.value)
        assert abs(chance.value) < 0.05 and chance.details["clean_acc"] < 0.2, (name, chance.value)


def test_vfl_report_shows_the_new_attacks(honest, capsys):
    assert main(["report", str(honest.path), "--attacks", ",".join(NEW)]) == 0
    rep = json.loads((honest.path / "report.json").read_text())
    assert {a["name"] for a in rep["attacks"]} == set(NEW) - {"active_model_completion"}
    assert "attack.amc_party" in rep["skipped"]["active_model_completion"]
    md = (honest.path / "report.md").read_text()
    assert all(f"| {n} |" in md for n in NEW if n != "active_model_completion")
