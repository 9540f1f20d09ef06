"""``privacy.bottom_dp``: a frozen validated section; bad values and combinations name the key."""

from __future__ import annotations

import dataclasses

import pytest

from simulations.cli.runner import resolve_config
from vfl.core.errors import ConfigError
from vfl.engine.schema import BottomDPConfig

ON = "privacy.bottom_dp={noise_multiplier: 1.0, max_grad_norm: 1.0}"


def _load(*overrides: str, config: str = "demo"):
    return resolve_config(config, list(overrides))


def test_absent_or_null_is_off_and_a_section_is_frozen():
    assert _load("strategy=pbm").privacy.bottom_dp is None
    assert _load("strategy=pbm", "privacy.bottom_dp=null").privacy.bottom_dp is None
    dp = _load("strategy=pbm", ON).privacy.bottom_dp
    assert dp == BottomDPConfig(noise_multiplier=1.0, max_grad_norm=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        dp.noise_multiplier = 2.0  # type: ignore[misc]


@pytest.mark.parametrize(("override", "key"), [
    ("privacy.bottom_dp={noise_multiplier: 0, max_grad_norm: 1}", "privacy.bottom_dp.noise_multiplier"),
    ("privacy.bottom_dp={noise_multiplier: -1, max_grad_norm: 1}", "privacy.bottom_dp.noise_multiplier"),
    ("privacy.bottom_dp={noise_multiplier: .nan, max_grad_norm: 1}", "privacy.bottom_dp.noise_multiplier"),
    ("privacy.bottom_dp={noise_multiplier: x, max_grad_norm: 1}", "privacy.bottom_dp.noise_multiplier"),
    ("privacy.bottom_dp={noise_multiplier: 1, max_grad_norm: 0}", "privacy.bottom_dp.max_grad_norm"),
    ("privacy.bottom_dp={noise_multiplier: 1}", "privacy.bottom_dp.max_grad_norm"),
    ("privacy.bottom_dp={noise_multiplier: 1, max_grad_norm: 1, clip: 2}", "privacy.bottom_dp.clip"),
    ("privacy.bottom_dp=3", "privacy.bottom_dp"),
])
def test_bad_values_name_the_key(override, key):
    with pytest.raises(ConfigError) as info:
        _load("strategy=pbm", override)
    assert info.value.key == key


@pytest.mark.parametrize(("strategy", "why"), [("npq", "without DP noise"), ("npq+secagg", "without DP noise")])
def test_strategies_whose_releases_are_not_dp_are_refused(strategy, why):
    with pytest.raises(ConfigError, match=why) as info:
        _load(f"strategy={strategy}", "params={}", ON)
    assert info.value.key == "privacy.bottom_dp"


@pytest.mark.parametrize(("config", "why"), [("sap-rt", "dχ-privatized"), ("dcor-rt", "statistic of the whole batch"),
                                           ("pslf-rt", "randomized-response labels")])
def test_llm_strategies_where_clipping_bounds_nothing_are_refused(config, why):
    with pytest.raises(ConfigError, match=why) as info:
        _load(ON, config=config)
    assert info.value.key == "privacy.bottom_dp"


@pytest.mark.parametrize("config", ["split-lora-rt", "head-only-rt", "p3eft-rt"])
def test_split_llm_strategies_accept_it(config):
    """DP-SGD of the client's adapters + head (tests/unit/llm/test_llm_dp.py); p3eft without its regularizer."""
    if config == "p3eft-rt":
        with pytest.raises(ConfigError) as info:
            _load(ON, config=config)
        assert info.value.key == "params.alpha"
        assert _load(ON, "params.alpha=0", config=config).privacy.bottom_dp is not None
    else:
        assert _load(ON, config=config).privacy.bottom_dp is not None


@pytest.mark.parametrize("strategy", ["pbm", "ldp"])
def test_dp_release_strategies_accept_it(strategy):
    assert _load(f"strategy={strategy}", "params={}", ON).privacy.bottom_dp is not None
