"""``privacy.target_epsilon`` bounds the ε a run reports, DP-SGD of the bottom (``privacy.bottom_dp``)
included; and ``privacy.colluders``: the PBM ε counts only the honest parties' binomials."""

from __future__ import annotations

import dataclasses

import pytest

import strategies  # noqa: F401
from vfl.core.errors import ConfigError
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.privacy import Accountant
from vfl.privacy.accounting.calibrate import calibrate_ldp_sigma, calibrate_pbm_beta

BOTTOM_DP = {"noise_multiplier": 4.0, "max_grad_norm": 1.0}
EPOCHS = 20


def _reported(cfg) -> float:
    """The ε the engine reports after ``train.epochs``: every epoch's events of the strategy, composed."""
    acc = Accountant()
    strategy = STRATEGIES.get(cfg.strategy)(cfg)
    for epoch in range(cfg.train.epochs):
        for event in strategy.privacy_events(epoch=epoch):
            acc.record(event)
    return acc.epsilon(cfg.privacy.delta)[0]


def _cfg(strategy: str, *, target: float | None = 20.0, bottom_dp=BOTTOM_DP, colluders: int = 0, parties: int = 4,
         params: dict | None = None):
    privacy = {"target_epsilon": target, "bottom_dp": bottom_dp, "colluders": colluders}
    return load_run_config({"strategy": strategy, "num_parties": parties, "train": {"epochs": EPOCHS},
                            "privacy": privacy, "params": params or {}})


@pytest.mark.parametrize("strategy", ["pbm", "ldp"])
def test_target_with_bottom_dp_is_met_by_the_reported_epsilon(strategy):
    cfg = _cfg(strategy)
    eps = _reported(cfg)
    assert eps <= 20.0 and eps == pytest.approx(20.0, rel=1e-3)
    # control: calibrating the releases alone (the old behaviour) reports above the target
    sens = 2 * cfg.model.tanh_c * cfg.model.embed_dim ** 0.5
    if strategy == "pbm":
        beta, _ = calibrate_pbm_beta(target_epsilon=20.0, delta=cfg.privacy.delta, b=cfg.params.b, num_parties=4,
                                     dim=cfg.model.embed_dim, epochs=EPOCHS)
        old = dataclasses.replace(cfg, params=dataclasses.replace(cfg.params, beta=beta))
    else:
        sigma, _ = calibrate_ldp_sigma(target_epsilon=20.0, delta=cfg.privacy.delta, sensitivity=sens, epochs=EPOCHS)
        old = dataclasses.replace(cfg, params=dataclasses.replace(cfg.params, sigma=sigma))
    assert _reported(old) > 21.0


def test_a_target_bottom_dp_alone_exceeds_is_refused_naming_both_keys():
    with pytest.raises(ConfigError, match=r"^privacy\.target_epsilon: got 2; privacy\.bottom_dp alone") as exc:
        _cfg("pbm", target=2.0)
    assert "\n" not in str(exc.value)


def test_colluders_out_of_range_is_one_line_naming_the_key_and_range():
    with pytest.raises(ConfigError, match=r"^privacy\.colluders: got 3; allowed: an int in \[0, 2\]"):
        _cfg("pbm", target=None, bottom_dp=None, colluders=3)
    with pytest.raises(ConfigError, match=r"^privacy\.colluders"):
        _cfg("pbm", target=None, bottom_dp=None, colluders=-1)


def test_epsilon_grows_with_colluders_and_equals_the_honest_parties_run():
    """M = 10 (SecAgg threshold t = 6): c colluders leave M - c binomials; c >= t opens each party's counts."""
    m = 10
    eps = [_reported(_cfg("pbm", target=None, bottom_dp=None, colluders=c, parties=m)) for c in range(m - 1)]
    assert all(a < b for a, b in zip(eps[:6], eps[1:6], strict=False)), eps  # strictly up to c = t - 1 = 5
    assert all(a <= b for a, b in zip(eps, eps[1:], strict=False)), eps
    for c in range(6):
        assert eps[c] == pytest.approx(_reported(_cfg("pbm", target=None, bottom_dp=None, parties=m - c)), rel=1e-12)
    alone = _reported(_cfg("pbm", target=None, bottom_dp=None, parties=m, params={"secagg": False}))
    assert eps[6] == eps[8] == pytest.approx(alone, rel=1e-12)  # t colluders unmask single inputs


def test_colluders_do_not_change_ldp_where_each_release_is_seen_alone():
    base = _reported(_cfg("ldp", target=None, bottom_dp=None))
    assert _reported(_cfg("ldp", target=None, bottom_dp=None, colluders=2)) == base


def test_calibration_uses_the_honest_parties():
    cfg = _cfg("pbm", bottom_dp=None, colluders=2, parties=10)
    assert _reported(cfg) <= 20.0 and _reported(cfg) == pytest.approx(20.0, rel=1e-3)
