"""Calibration to a target ε: PBM's β at fixed b, LDP's σ; config key and `vfl account --target-epsilon`."""

from __future__ import annotations

import json

import pytest

import strategies  # noqa: F401
from simulations.cli.main import main
from vfl.core.errors import ConfigError
from vfl.engine.schema import load_run_config
from vfl.privacy.accounting.calibrate import (
    calibrate_ldp_sigma,
    calibrate_pbm_beta,
    ldp_epsilon,
    pbm_epsilon,
)


def test_pbm_beta_reaches_the_target_from_below():
    beta, eps = calibrate_pbm_beta(target_epsilon=20.0, delta=1e-5, b=16, num_parties=4, dim=16, epochs=10)
    assert 0 < beta < 0.25 and eps <= 20.0 and eps == pytest.approx(20.0, rel=1e-3)
    assert pbm_epsilon(b=16, beta=beta * 1.01, num_parties=4, dim=16, epochs=10, delta=1e-5) > 20.0


def test_ldp_sigma_reaches_the_target_from_below():
    sigma, eps = calibrate_ldp_sigma(target_epsilon=3.0, delta=1e-5, sensitivity=8.0, epochs=10)
    assert eps <= 3.0 and eps == pytest.approx(3.0, rel=1e-3)
    assert ldp_epsilon(sigma=sigma * 0.99, sensitivity=8.0, epochs=10, delta=1e-5) > 3.0


def test_unreachable_target_names_the_key_and_the_range():
    with pytest.raises(ConfigError, match=r"privacy\.target_epsilon: .*reaches epsilon in \["):
        calibrate_pbm_beta(target_epsilon=1e6, delta=1e-5, b=2, num_parties=2, dim=4, epochs=1)


def _cfg(strategy: str, params: dict | None = None, target: float = 10.0):
    return load_run_config({"strategy": strategy, "num_parties": 4, "train": {"epochs": 5},
                            "privacy": {"target_epsilon": target}, "params": params or {}})


def test_config_target_sets_beta_or_sigma_and_the_resolved_config_records_it():
    pbm = _cfg("pbm", {"b": 8})
    beta, _ = calibrate_pbm_beta(target_epsilon=10.0, delta=1e-5, b=8, num_parties=4, dim=16, epochs=5)
    assert pbm.params.beta == pytest.approx(beta) and pbm.to_dict()["params"]["beta"] == pytest.approx(beta)
    assert pbm.params.b == 8
    ldp = _cfg("ldp")
    assert ldp.params.sigma is not None and ldp.to_dict()["params"]["sigma"] == ldp.params.sigma
    with pytest.raises(ConfigError, match="privacy.target_epsilon"):
        _cfg("npq")


def test_cli_account_target_epsilon(capsys):
    assert main(["account", "--mechanism", "pbm", "--b", "16", "--parties", "4", "--dim", "16", "--epochs", "20",
                 "--delta", "1e-5", "--target-epsilon", "50"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"] <= 50 and 0 < out["beta"] <= 0.25
    assert main(["account", "--mechanism", "ldp", "--b", "16", "--parties", "4", "--dim", "16", "--epochs", "20",
                 "--delta", "1e-5", "--target-epsilon", "50"]) == 0
    assert json.loads(capsys.readouterr().out)["sigma"] > 0
    assert main(["account", "--mechanism", "pbm", "--b", "16", "--parties", "4", "--target-epsilon", "5"]) == 2
    assert "--epochs" in capsys.readouterr().err
