"""A run calibrated with privacy.target_epsilon can be extended: `vfl run --resume --set
train.epochs=N` keeps the calibrated mechanism (params.beta as chosen) instead of recalibrating it
for N epochs (which was refused as a change of params.beta), warns that ε will pass the target, and
the reported ε is the accountant's for the epochs actually run."""

from __future__ import annotations

import json

import yaml

from simulations.cli.main import main

FAST = ["--transport", "inprocess", "--no-progress", "--set", "params.b=8", "--set", "data.train_subsample=256",
        "--set", "data.test_subsample=64", "--set", "privacy.target_epsilon=40"]


def test_a_calibrated_run_extends_with_its_beta_and_says_epsilon_passes_the_target(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "demo", "--out", str(out), *FAST, "--set", "train.epochs=2"]) == 0
    first = json.loads((out / "summary.json").read_text())
    beta = yaml.safe_load((out / "config.resolved.yaml").read_text())["params"]["beta"]
    assert first["epsilon"] <= 40 + 1e-9
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--no-progress", "--set", "train.epochs=3"]) == 0
    err = capsys.readouterr().err
    assert "epsilon will pass the target" in err
    cfg = yaml.safe_load((out / "config.resolved.yaml").read_text())
    assert cfg["params"]["beta"] == beta and cfg["privacy"]["target_epsilon"] is None and cfg["train"]["epochs"] == 3
    extended = json.loads((out / "summary.json").read_text())
    assert extended["epochs"] == 3 and extended["epsilon"] > 40


def test_a_plain_resume_of_a_calibrated_run_keeps_its_target(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "demo", "--out", str(out), *FAST, "--set", "train.epochs=2"]) == 0
    assert main(["run", "--resume", str(out), "--no-progress", "--set", "train.eval_every=1"]) == 0
    assert "epsilon will pass the target" not in capsys.readouterr().err
    assert yaml.safe_load((out / "config.resolved.yaml").read_text())["privacy"]["target_epsilon"] == 40
