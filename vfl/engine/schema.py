"""The run configuration: one frozen, validated ``RunConfig`` per run.

Sections mirror the YAML files in ``simulations/configs/``. Strategy-specific options live in
``params`` and are validated by the chosen strategy's own ``Params`` dataclass. The dataclasses
live in ``vfl/config/run_config.py`` (re-exported here, so ``from vfl.engine.schema import RunConfig`` works).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from vfl.config.conflicts import check_conflicts, warn_overridden
from vfl.config.fields import build
from vfl.config.run_config import (
    AttackConfig,
    BottomDPConfig,
    DataConfig,
    ModelConfig,
    PrivacyConfig,
    RunConfig,
    TrainConfig,
    TransportConfig,
)
from vfl.core.errors import ConfigError
from vfl.engine.strategy import STRATEGIES  # the registry is filled by `strategies`
from vfl.privacy.defenses import check_defenses
from vfl.runtime.devices import check_placement

__all__ = ["AttackConfig", "BottomDPConfig", "DataConfig", "ModelConfig", "PrivacyConfig", "RunConfig", "TrainConfig",
           "TransportConfig", "load_run_config"]


def load_run_config(data: Mapping[str, Any]) -> RunConfig:
    """Validate a plain mapping into a ``RunConfig`` whose ``params`` is the strategy's dataclass."""
    raw = dict(data)
    params_raw = raw.pop("params", None) or {}
    if not isinstance(params_raw, Mapping):
        raise ConfigError("params", f"got {params_raw!r}; expected a mapping of strategy options")
    try:
        cfg = build(RunConfig, raw)
    except ConfigError as exc:
        if exc.key == "privacy.secure_rng":  # removed: say what replaces it
            raise ConfigError(exc.key, f"{str(exc).split(': ', 1)[1]} (removed: privacy noise is now "
                              "unpredictable by default; see privacy.noise_rng: crypto|seeded)") from None
        raise
    strategy_cls = STRATEGIES.get(cfg.strategy, key="strategy")
    try:
        params: Any = build(strategy_cls.Params, params_raw, prefix="params")
    except ConfigError as exc:
        if "unknown key" in str(exc):
            raise ConfigError(exc.key, f"{str(exc).split(': ', 1)[1]} (options of strategy {cfg.strategy!r}; "
                              "when switching strategy, reset them with --set params={})") from None
        raise
    cfg = dataclasses.replace(cfg, params=params)
    cfg = _sync_rounds(cfg, strategy_cls, raw, params_raw)
    strategy_cls.validate_config(cfg)
    cfg = dataclasses.replace(cfg, defenses=check_defenses(cfg, strategy_cls))
    if cfg.privacy.bottom_dp is not None and strategy_cls.bottom_dp_refusal:
        raise ConfigError("privacy.bottom_dp", f"not available with strategy {cfg.strategy!r}: "
                          f"{strategy_cls.bottom_dp_refusal}")
    _check_colluders(cfg)
    _check_local_steps(cfg, strategy_cls)
    _check_lr_schedule(cfg, strategy_cls)
    _check_step_checkpoints(cfg, strategy_cls)
    _check_attack(cfg)
    check_placement(cfg, server_profile=str(strategy_cls.server_profile))
    check_conflicts(cfg)  # vfl/config/conflicts.py: pairs of keys refused, or a warning naming which wins
    if cfg.privacy.target_epsilon is not None:  # sets params.beta / params.sigma (recorded in the resolved config)
        before, cfg = cfg, strategy_cls.calibrate_to_target(cfg)
        warn_overridden(before, cfg, given=params_raw)
    return cfg


def _sync_rounds(cfg: RunConfig, strategy_cls: Any, raw: Mapping[str, Any], params_raw: Mapping[str, Any]) -> RunConfig:
    """A strategy that counts its rounds by a parameter of its own (``rounds_param``: secureboost's
    ``n_estimators``) keeps ``train.epochs`` equal to it: whichever of the two is given sets the other;
    both given and different is refused."""
    key = getattr(strategy_cls, "rounds_param", None)
    if not key:
        return cfg
    train = raw.get("train")
    epochs = train.get("epochs") if isinstance(train, Mapping) else None
    rounds = int(getattr(cfg.params, key))
    if key not in params_raw and epochs is not None:
        rounds = int(cfg.train.epochs)
        cfg = dataclasses.replace(cfg, params=dataclasses.replace(cfg.params, **{key: rounds}))
    elif epochs is not None and int(cfg.train.epochs) != rounds:
        raise ConfigError("train.epochs", f"got {cfg.train.epochs} with params.{key} {rounds}; strategy "
                          f"{cfg.strategy!r} counts its rounds in params.{key} (train.epochs follows it): set that")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, epochs=rounds))


def _check_colluders(cfg: RunConfig) -> None:
    c, m = cfg.privacy.colluders, cfg.num_parties
    if c is not None and c > max(0, m - 2):
        raise ConfigError("privacy.colluders", f"got {c}; allowed: an int in [0, {max(0, m - 2)}] "
                          f"(0..M-2 with M = {m} parties: at least two honest parties)")


def _check_local_steps(cfg: RunConfig, strategy_cls: Any) -> None:
    q = cfg.train.local_steps
    if q > 1 and not getattr(strategy_cls, "supports_local_steps", False):
        raise ConfigError("train.local_steps", f"got {q}; strategy {cfg.strategy!r} allows only 1 "
                          "(FedBCD local updates: npq, ldp, pbm, npq+secagg)")
    if q > 1 and cfg.privacy.bottom_dp is not None:
        raise ConfigError("train.local_steps", f"got {q}; with privacy.bottom_dp allowed: 1 (each local step "
                          "would be an extra DP-SGD step on the same batch, which the accountant does not count)")


def _check_lr_schedule(cfg: RunConfig, strategy_cls: Any) -> None:
    t = cfg.train
    if t.warmup_steps and t.warmup_ratio:
        raise ConfigError("train.warmup_ratio", f"got {t.warmup_ratio} with train.warmup_steps {t.warmup_steps}; "
                          "set one of the two (the other 0)")
    used = t.lr_schedule != "constant" or t.warmup_steps or t.warmup_ratio
    if used and not getattr(strategy_cls, "supports_lr_schedule", False):
        key = "train.lr_schedule" if t.lr_schedule != "constant" else "train.warmup_steps"
        raise ConfigError(key, f"strategy {cfg.strategy!r} trains with a constant train.lr; lr schedules and "
                          "warmup: the split-LLM strategies (sap, p3eft, split-lora, dcor, pslf, head-only)")


def _check_step_checkpoints(cfg: RunConfig, strategy_cls: Any) -> None:
    n = cfg.train.checkpoint_every_steps
    if n and not getattr(strategy_cls, "step_checkpoints", False):
        raise ConfigError("train.checkpoint_every_steps", f"got {n}; strategy {cfg.strategy!r} checkpoints at the "
                          "end of each epoch only (set 0); mid-epoch checkpoints: p3eft, split-lora, dcor, pslf, "
                          "head-only, ushape-lora, ushape-p3eft")


def _check_attack(cfg: RunConfig) -> None:
    a, m = cfg.attack, cfg.num_parties
    for key, value in (("attack.canary_party", a.canary_party), ("attack.backdoor_party", a.backdoor_party),
                       ("attack.amc_party", a.amc_party)):
        if value is not None and value >= m:
            raise ConfigError(key, f"got {value}; allowed: a party index in [0, {m - 1}]")
    if a.canaries and not cfg.privacy.record_views:
        raise ConfigError("attack.canaries", "the audit guesses from what the server received; "
                          "set privacy.record_views: true")
