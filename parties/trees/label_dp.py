"""Label DP per boosting round: the label holder noises every row's gradient before it is encrypted.

Neighbours change ONE training row's label. Only the gradient depends on it (the hessians of logistic,
softmax and squared loss are functions of the margins alone), so each round the label holder releases
``code(row) + N_Z(0, σ²)`` per row and class on a fixed-point grid ``{j / L}`` (``ldp_grid``: exact
discrete Gaussian, DP in floating point), with the label's part clipped:

- ``binary:logistic``: g = p − y; the grid code is ``round(p·L) − y·L`` clipped to ±⌊clip·L⌋, so one label
  moves it by at most min(L, 2⌊clip·L⌋) grid steps (1, or 2·clip, in gradient units);
- ``multi:*``: the same per class, a label change moves two classes: L2 sensitivity √2·min(1, 2·clip);
- ``reg:squarederror``: g = ŷ − y, code ``round(ŷ·L) − round(y·L)`` clipped to ±⌊clip·L⌋: sensitivity 2·clip.

The noise std is ``noise_multiplier`` × that sensitivity, so one round is one Gaussian mechanism with that
noise multiplier (``LabelGaussianEvent``): every tree of the round, every split, every instance space and
every leaf after it is post-processing of the noisy gradients (and of label-free data).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from parties.trees.objectives import Objective
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.privacy.accounting.events import LabelGaussianEvent
from vfl.privacy.mechanisms.gaussian import add_discrete_gaussian, ldp_grid


@dataclass(frozen=True)
class LabelDP:
    """``params.label_dp``: the noise multiplier z and the clip of each row's gradient (per class)."""

    noise_multiplier: float
    clip: float


@dataclass(frozen=True)
class Grid:
    levels: int  # L: grid steps per gradient unit (a power of two)
    sigma2: int  # the discrete Gaussian's variance in grid steps (>= (σ·L)²)
    clip: int  # ⌊clip·L⌋ grid steps
    sensitivity: int  # L2 change of one row's vector, in grid steps (√2 for multiclass: see ``event``)
    pairs: bool  # a label change moves two coordinates (multiclass)

    def event(self, count: int = 1) -> LabelGaussianEvent:
        """The accountant's record of ``count`` rounds (σ and Δ in gradient units)."""
        delta = self.sensitivity * (math.sqrt(2.0) if self.pairs else 1.0) / self.levels
        return LabelGaussianEvent(sigma=math.sqrt(self.sigma2) / self.levels, sensitivity=delta, count=count)


def nominal_sensitivity(objective: Objective, clip: float) -> float:
    """L2 sensitivity of one row's gradient vector to its label after clipping (gradient units)."""
    if objective.regression:
        return 2.0 * clip
    one = min(1.0, 2.0 * clip)
    return math.sqrt(2.0) * one if objective.multiclass else one


def grid(objective: Objective, dp: LabelDP) -> Grid:
    """The grid and noise of a round (a pure function of the config: the driver accounts what the label holder draws)."""
    if not (dp.noise_multiplier > 0 and math.isfinite(dp.noise_multiplier)):
        raise ConfigError("params.label_dp.noise_multiplier", f"got {dp.noise_multiplier!r}; allowed: a number > 0")
    if not (dp.clip > 0 and math.isfinite(dp.clip)):
        raise ConfigError("params.label_dp.clip", f"got {dp.clip!r}; allowed: a number > 0")
    sigma = dp.noise_multiplier * nominal_sensitivity(objective, dp.clip)
    try:
        levels, sigma2 = ldp_grid(sigma=sigma, c=1.0)
    except ConfigError:
        raise ConfigError("params.label_dp.noise_multiplier", f"got {dp.noise_multiplier!r}: a noise std of {sigma:g} "
                          "gradient units carries nothing (allowed: below 4096 units)") from None
    clip = max(1, int(math.floor(dp.clip * levels)))
    sens = 2 * clip if objective.regression else min(levels, 2 * clip)
    return Grid(levels=levels, sigma2=sigma2, clip=clip, sensitivity=sens, pairs=objective.multiclass)


def label_codes(*, objective: Objective, margins: np.ndarray, y: np.ndarray, gr: Grid) -> np.ndarray:
    """(N, outputs) int64 grid codes of the round's gradients, the label's part clipped (before noise)."""
    levels = gr.levels
    pred = objective.predict(margins).astype(np.float64)
    if objective.regression:
        code = (np.rint(pred * levels).astype(np.int64) - np.rint(np.asarray(y, np.float64) * levels).astype(np.int64))[:, None]
    elif objective.multiclass:
        onehot = np.zeros(pred.shape, dtype=np.int64)
        onehot[np.arange(len(y)), np.asarray(y, np.int64)] = levels
        code = np.rint(pred * levels).astype(np.int64) - onehot
    else:
        code = (np.rint(pred * levels).astype(np.int64) - np.asarray(y, np.int64) * levels)[:, None]
    return np.clip(code, -gr.clip, gr.clip)


def noisy_gradients(*, objective: Objective, margins: np.ndarray, y: np.ndarray, dp: LabelDP,
                    noise: NoiseSource) -> np.ndarray:
    """(N, outputs) float64 gradients of one round: ``label_codes`` + N_Z(0, σ²) on the grid, in gradient units."""
    gr = grid(objective, dp)
    code = label_codes(objective=objective, margins=margins, y=y, gr=gr)
    noisy = add_discrete_gaussian(torch.from_numpy(code), sigma2=gr.sigma2, noise=noise).numpy()
    return noisy.astype(np.float64) / gr.levels
