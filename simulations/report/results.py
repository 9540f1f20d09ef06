"""Run-level attacks: a registry of name -> function(run) returning ``AttackResult`` rows.

Each function maps what a node of the run received (its recorded view) plus the auxiliary
knowledge the attack declares onto the pure attacks of ``vfl.attacks``, and scores the outcome
with the experimenter's ground truth. ``Skipped`` says why an attack does not apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simulations.report.intervals import Interval, verdict
from simulations.report.run import RunArtifacts
from vfl.core.registry import Registry


@dataclass
class AttackResult:
    """One number of one attack, beside the number a blind guess gets (``baseline``, drawn as
    ``baseline_label``), with its 95 % interval (``ci``, ``simulations/report/intervals.py``) and what it
    was measured on (``measured_on``: which rows, samples or trials, how many)."""

    name: str
    metric: str
    value: float
    baseline: float
    threat: str = ""
    higher_is_better_attack: bool = True
    details: dict[str, Any] = field(default_factory=dict)
    figure: str | None = None
    ci: Interval | None = None
    measured_on: str = ""
    baseline_label: str = "chance"

    @property
    def succeeded(self) -> bool | None:
        """The verdict: with an interval, whether all of it lies beyond the baseline on the side of
        leakage; without one (a split-LLM strategy's own number, no sample count), the rough rule: the
        attack beats its baseline by 10 % (relative) and, for rates and AUCs, 0.05 (absolute)."""
        if not (math.isfinite(self.value) and math.isfinite(self.baseline)):
            return None
        if self.ci is not None:
            return verdict(self.ci, self.baseline, higher_leaks=self.higher_is_better_attack)
        gap = self.value - self.baseline if self.higher_is_better_attack else self.baseline - self.value
        bounded = abs(self.baseline) <= 1 and abs(self.value) <= 1  # rates, AUCs: also 5 points absolute
        return bool(gap > 0.1 * max(abs(self.baseline), 0.1) and (not bounded or gap > 0.05))

    @property
    def verdict_basis(self) -> str:
        return "95 % interval" if self.ci is not None else "rough rule (no interval)"

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "metric": self.metric, "value": _num(self.value), "baseline": _num(self.baseline),
               "threat": self.threat, "attack_succeeded": self.succeeded, "verdict_basis": self.verdict_basis,
               "ci95": self.ci.to_json() if self.ci is not None else None,
               "ci_method": self.ci.method if self.ci is not None else None, "measured_on": self.measured_on,
               "baseline_label": self.baseline_label}
        out.update({k: _num(v) if isinstance(v, float) else v for k, v in self.details.items()})
        if self.figure:
            out["figure"] = self.figure
        return out


def _num(x: float) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None


RunAttack = Callable[[RunArtifacts], list[AttackResult]]
RUN_ATTACKS: Registry[RunAttack] = Registry("attack")
