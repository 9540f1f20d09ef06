"""What summary.json says about the run as a whole, beyond the engine's training figures.

``wall_s`` is the whole run (config checks, data, Ray start-up, key set-up, training, evaluation,
checkpoints) up to the summary, counted from the ``vfl run`` process's start (interpreter start-up and
imports included: what ``time vfl run`` shows, less writing the plots) and from the call for ``vfl.run``
and sweeps, whose process may have started long before; the engine's training clock stays as
``train_wall_s``. Plus
``seed``, and with ``privacy.target_epsilon`` the strategy options the calibration chose
(``calibrated``, e.g. ``{"params.beta": 0.071}``).
"""

from __future__ import annotations

import dataclasses
import math
import os
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


_FROM_PROCESS_START: list[bool] = []  # set once by `vfl run` (a process that exists for one run)


def count_from_process_start() -> None:
    """Make ``wall_s`` count from this process's start (``vfl run``: the process is the run)."""
    _FROM_PROCESS_START[:] = [True]


def process_age() -> float:
    """Seconds since this process started: Linux's start tick (/proc/self/stat) against the boot clock,
    to 10 ms; elsewhere psutil's start time (whole-second boot time: up to 1 s off)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux
        import psutil

        return time.time() - psutil.Process().create_time()


def wall_seconds(started: float) -> float:
    """Seconds since ``started`` (a ``time.perf_counter()``), or since the process started when
    ``count_from_process_start`` was called."""
    since_call = time.perf_counter() - started
    return max(process_age(), since_call) if _FROM_PROCESS_START else since_call


def finish_summary(summary: dict[str, Any], *, cfg: RunConfig, started: float) -> dict[str, Any]:
    """Add the whole-run figures to the engine's ``summary`` (in place; returned for chaining).
    ``started`` is a ``time.perf_counter()`` taken when the run began (see ``wall_seconds``)."""
    summary["train_wall_s"] = summary.get("wall_s")
    summary["wall_s"] = wall_seconds(started)
    summary["seed"] = cfg.seed
    if cfg.privacy.target_epsilon is not None:
        summary["target_epsilon"] = cfg.privacy.target_epsilon
        summary["calibrated"] = calibrated_params(cfg)
    return summary
