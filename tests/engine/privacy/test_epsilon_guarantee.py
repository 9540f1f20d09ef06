"""What summary.json says beside ε (inprocess runs): whether it holds in floating point
(``epsilon_is_guarantee``, ``epsilon_not_exact``) and against whom (``epsilon_assumption``)."""

from __future__ import annotations

import json

import pytest

import strategies  # noqa: F401
from simulations.cli.runner import execute, resolve_config

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")

TINY = ["transport.kind=inprocess", "train.epochs=1", "data.train_subsample=300", "data.test_subsample=100"]


def _summary(tmp_path, name: str, *overrides: str) -> dict:
    cfg = resolve_config("digits-5p", [*TINY, *overrides])
    execute(cfg, out_dir=tmp_path / name, progress=False)
    return json.loads((tmp_path / name / "summary.json").read_text())


def test_discrete_ldp_is_a_guarantee_and_float_ldp_is_not(tmp_path):
    exact = _summary(tmp_path, "discrete", "strategy=ldp", "params={}")
    assert exact["epsilon_is_guarantee"] is True and "epsilon_not_exact" not in exact
    assert exact["epsilon_assumption"] == "server alone (no party colludes)"
    old = _summary(tmp_path, "float", "strategy=ldp", "params={noise: float}")
    assert old["epsilon_is_guarantee"] is False and "Mironov" in old["epsilon_not_exact"][0]
    assert old["epsilon"] == exact["epsilon"]  # same accounting: only the float claim is withdrawn


def test_bottom_dp_float_noise_colluders_and_the_calibrated_target_are_honoured(tmp_path):
    """pbm with 2 colluders of 5, DP-SGD of the bottoms and privacy.target_epsilon = 20: the run's ε is at
    most 20 (the calibration composed DP-SGD and counted 3 honest parties), and summary.json says so."""
    s = _summary(tmp_path, "pbm", "strategy=pbm", "params={b: 16}", "privacy.colluders=2",
                 "privacy.target_epsilon=20", "privacy.bottom_dp={noise_multiplier: 1.0, max_grad_norm: 1.0}")
    assert s["epsilon"] <= 20.0 and s["epsilon"] == pytest.approx(20.0, rel=1e-3)
    assert s["epsilon_is_guarantee"] is False and any("bottom_dp" in c for c in s["epsilon_not_exact"])
    assert s["epsilon_assumption"].startswith("server + up to 2 colluding parties; the server keeps the SecAgg "
                                              "survivor protocol (params.secagg_mode: semi-honest")
    assert s["epsilon_assumption"].endswith("SecAgg opens no single input to the server with up to 2 colluding parties "
                                            "(privacy.colluders, t = 3; each party reveals nothing for fewer than 4 "
                                            "parties)")  # what the SecAgg rules hold against, t - 1 = 2 here
