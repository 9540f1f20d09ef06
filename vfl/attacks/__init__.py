"""Attacks as evaluation tools: each runs on what a party or server actually received."""

from vfl.attacks.attribute import attribute_inference, majority_rate, pooled_features, split_labeled
from vfl.attacks.inversion import nearest_neighbor_inversion, optimization_inversion, token_recovery

__all__ = [
    "attribute_inference",
    "majority_rate",
    "nearest_neighbor_inversion",
    "optimization_inversion",
    "pooled_features",
    "split_labeled",
    "token_recovery",
]
