"""``label_rr``: label DP by randomized response at the label holder (Ghazi et al., NeurIPS 2021).

The server draws a randomized-response label for every training example ONCE, from its own
cryptographic noise source, and trains on those labels for the whole run. Every gradient it sends
down and every model it ends with is a function of the features and of these randomized labels
only, so by post-processing the run is ε-label-DP for every passive party (and anyone who reads
the final model): one release per example, so the run's label ε is ``epsilon``, not ε × epochs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vfl.config.fields import param
from vfl.core.rng import NoiseSource
from vfl.privacy.defenses import Defense, register
from vfl.privacy.mechanisms.label_dp import randomized_response


@dataclass(frozen=True)
class LabelRRParams:
    epsilon: float = param(1.0, gt=0, le=50, help="label-DP epsilon of randomized response: keep each "
                           "training label w.p. e^eps/(e^eps+K-1), else a uniform other class")


@register("label_rr")
class LabelRR(Defense):
    """Label DP by randomized response (Ghazi et al. 2021): the server trains on labels randomized once, eps-label-DP."""

    Params = LabelRRParams
    site = "labels"
    protects = "labels"
    headline = ("epsilon_label",)

    def relabel(self, y: np.ndarray, *, num_classes: int, noise: NoiseSource) -> np.ndarray:
        return randomized_response(y, num_classes=num_classes, epsilon=self.params.epsilon, noise=noise)

    def label_epsilon(self) -> float:
        return float(self.params.epsilon)
