"""``label_rr_prior``: RRWithPrior in two stages (Ghazi et al., NeurIPS 2021, Alg. 2 inside Alg. 3).

Stage 1: a random ``first_stage`` fraction of the training examples (chosen from the server's noise,
independently of the labels) gets its label by RRWithPrior with a uniform prior (= randomized
response) before training; the other examples are left undrawn and the head's loss ignores them.
Stage 2: in epoch ``stage_epoch − 1`` the server draws each remaining example's label ONCE by
RRWithPrior, with the head's softmax prediction on that example's fused embedding as its prior (a
model trained only on other examples' randomized labels, so independent of this label); those labels
are used from epoch ``stage_epoch`` on (drawn a full epoch before use: a draw lost in a crash was
never released). Every label is drawn once by an ε-DP mechanism and everything else is a function of
the features and of other examples' draws: the run is ε-label-DP (``epsilon_label`` = ``epsilon``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vfl.config.fields import param
from vfl.core.rng import NoiseSource
from vfl.privacy.defenses import UNDRAWN, Defense, register
from vfl.privacy.mechanisms.rr_prior import rr_with_prior

EXCLUSIVE = ("label_rr", "label_gp", "marvell", "cae", "dcae")  # also read or replace the training labels


@dataclass(frozen=True)
class LabelRRPriorParams:
    epsilon: float = param(1.0, gt=0, le=50, help="label-DP epsilon of every label's one RRWithPrior draw")
    # defaults measured on digits-5p/npq, 5 epochs, eps = 1 (docs/attacks.md section 7): a short run's
    # stage-1 head is a weak prior, so most labels go to stage 1 and the head trains 3 epochs on them first
    first_stage: float = param(0.8, gt=0, lt=1, help="fraction of training examples drawn before training with a "
                               "uniform prior (stage 1); the rest wait for the stage-1 model as their prior")
    stage_epoch: int = param(3, ge=1, le=100_000, help="first epoch that trains on the stage-2 labels (drawn "
                             "during epoch stage_epoch - 1 from the head's predictions); < train.epochs")


@register("label_rr_prior")
class LabelRRPrior(Defense):
    """RRWithPrior (Ghazi et al. 2021): RR restricted to the top-k labels of the stage-1 model's prediction; eps-label-DP."""

    Params = LabelRRPriorParams
    site = "labels"
    protects = "labels"
    headline = ("epsilon_label",)

    @classmethod
    def refusal(cls, cfg: Any, params: Any) -> str | None:
        if params.stage_epoch >= cfg.train.epochs:
            return (f"stage 2 starts at epoch stage_epoch={params.stage_epoch} but the run has train.epochs="
                    f"{cfg.train.epochs}; use stage_epoch < train.epochs")
        both = [str(e.get("kind")) for e in cfg.defenses if isinstance(e, Mapping) and e.get("kind") in EXCLUSIVE]
        if both:
            return f"{both[0]} also draws or reads the training labels; list one label defense of {', '.join(EXCLUSIVE)}"
        return None

    def relabel(self, y: np.ndarray, *, num_classes: int, noise: NoiseSource) -> np.ndarray:
        y = np.asarray(y, dtype=np.int64)
        first = noise.uniform(len(y)).numpy() < self.params.first_stage  # label-blind split
        out = np.full(len(y), UNDRAWN, dtype=np.int64)
        uniform = np.full((int(first.sum()), num_classes), 1.0 / num_classes)
        out[first] = rr_with_prior(y[first], prior=uniform, epsilon=self.params.epsilon, noise=noise)
        return out

    def stage_epoch(self) -> int:
        return int(self.params.stage_epoch)

    def draw_staged(self, y: np.ndarray, *, prior: np.ndarray, noise: NoiseSource) -> np.ndarray:
        return rr_with_prior(y, prior=prior, epsilon=self.params.epsilon, noise=noise)

    def label_epsilon(self) -> float:
        return float(self.params.epsilon)
