"""The test accuracies a report shows, each with what it is measured on, and the measurement that says
why they differ.

A run's ``final_test_acc`` is its own evaluation after the last epoch: every test row through the
mechanism's release with the run's fresh noise. The report evaluates the same checkpoint on the same
rows again: PBM and LDP randomize every release, evaluation included, so each evaluation is one draw of
a spread. ``readings`` measures that spread (``DRAWS`` seeded draws of the mechanism), the accuracy
without the mechanism (the plain fusion, which no node of a PBM/LDP run sees) and the binomial standard
error of the test set's size; draw 0 is the "clean" accuracy of the robustness attacks
(``noisy_samples``, ``missing_features``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulations.report.run import RunArtifacts, Skipped, evaluation_noise

DRAWS = 20


def epochs_of(metrics: list[dict[str, Any]], key: str = "test_acc") -> dict[str, Any]:
    """Which epoch (1-based, as the run prints it) the final value of ``key`` is from, and the best
    epoch's value and number; {} when no epoch logged it."""
    rows = [(int(r["epoch"]) + 1, float(r[key])) for r in metrics if r.get(key) is not None]
    if not rows:
        return {}
    best = max(rows, key=lambda e: e[1])  # the first of equal values
    return {"final": rows[-1][1], "final_epoch": rows[-1][0], "best": best[1], "best_epoch": best[0],
            "epochs": max(int(r["epoch"]) + 1 for r in metrics)}


def readings(run: RunArtifacts) -> dict[str, Any]:
    """The report's own evaluations of the final checkpoint on the test set (vertical runs); {} otherwise."""
    try:
        if not run.is_vertical:
            return {}
        model = run.model
    except Skipped:
        return {}
    shards, labels = run.parts
    xs, y = [s.x_test for s in shards], np.asarray(labels.y_test)

    def acc(noise: Any = None) -> float:
        return float((model.logits(xs, noise=noise).argmax(1).numpy() == y).mean())

    draws = [acc(evaluation_noise(run, d)) for d in range(DRAWS)]
    final = run.summary.get("final_test_acc")
    p = float(final) if isinstance(final, (int, float)) else float(np.mean(draws))
    return {"test_rows": int(len(y)), "draws": DRAWS, "draw0": draws[0], "mean": float(np.mean(draws)),
            "std": float(np.std(draws, ddof=1)), "min": float(min(draws)), "max": float(max(draws)),
            "without_mechanism": acc(), "binomial_se": math.sqrt(max(p * (1 - p), 0.0) / len(y))}
