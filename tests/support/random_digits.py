"""Digits whose labels carry nothing: the control dataset of the VFLAIR attack tests (``tests.support.random_digits:...``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from simulations.data.packaged import load_digits
from vfl.data.dataset import Dataset


def shuffled_labels(*, seed: int = 0, data_dir: object = None) -> Dataset:
    """The digits features with every label replaced by a uniform random class (independent of the features)."""
    ds = load_digits(seed=seed)
    rng = np.random.default_rng(12345 + seed)
    return dataclasses.replace(ds, name="digits-random-labels", y_train=rng.integers(0, 10, len(ds.y_train)),
                               y_test=rng.integers(0, 10, len(ds.y_test)))
