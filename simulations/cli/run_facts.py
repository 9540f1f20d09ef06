"""What summary.json says about the run as a whole, beyond the engine's training figures.

``wall_s`` is the whole run (config checks, data, Ray start-up, key set-up, training, evaluation,
checkpoints) up to the summary; the engine's training clock stays as ``train_wall_s``. Plus
``seed``, and with ``privacy.target_epsilon`` the strategy options the calibration chose
(``calibrated``, e.g. ``{"params.beta": 0.071}``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

from vfl.engine.schema import RunConfig
from vfl.engine.strategy import STRATEGIES


def calibrated_params(cfg: RunConfig) -> dict[str, Any]:
    """``params.<name>`` -> value for each option ``privacy.target_epsilon`` set: an option is
    calibrated when, put back to its default, the calibration gives the run's value again."""
    if (cfg.privacy.target_epsilon is None or not dataclasses.is_dataclass(cfg.params)
            or isinstance(cfg.params, type)):
        return {}
    cls = STRATEGIES.get(cfg.strategy, "strategy")
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg.params):
        value = getattr(cfg.params, f.name)
        default = f.default if f.default is not dataclasses.MISSING else None
        if value == default or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        again = cls.calibrate_to_target(dataclasses.replace(cfg, params=dataclasses.replace(
            cfg.params, **{f.name: default})))
        got = getattr(again.params, f.name)
        if isinstance(got, (int, float)) and math.isclose(got, value, rel_tol=1e-9):
            out[f"params.{f.name}"] = value
    if cfg.privacy.bottom_dp is not None and getattr(cls, "calibrates_bottom_dp", False):  # split LLMs' DP-SGD σ
        out["privacy.bottom_dp.noise_multiplier"] = cfg.privacy.bottom_dp.noise_multiplier
    return out


def finish_summary(summary: dict[str, Any], *, cfg: RunConfig, started: float) -> dict[str, Any]:
    """Add the whole-run figures to the engine's ``summary`` (in place; returned for chaining).
    ``started`` is a ``time.perf_counter()`` taken when the run began."""
    summary["train_wall_s"] = summary.get("wall_s")
    summary["wall_s"] = time.perf_counter() - started
    summary["seed"] = cfg.seed
    if cfg.privacy.target_epsilon is not None:
        summary["target_epsilon"] = cfg.privacy.target_epsilon
        summary["calibrated"] = calibrated_params(cfg)
    return summary
