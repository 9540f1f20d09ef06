"""User-style dataset factories for the bring-your-own-dataset tests (``tests.support.byo_data:...``)."""

from __future__ import annotations

import numpy as np

from vfl.data.dataset import Dataset


def blobs(*, seed, n=120, features=8):
    """Two Gaussian blobs, returned as a plain mapping of arrays (the simplest contract)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    x = rng.normal(size=(n, features)) + 2.0 * y[:, None]
    cut = n * 3 // 4
    return {"x_train": x[:cut], "y_train": y[:cut], "x_test": x[cut:], "y_test": y[cut:]}


def as_dataset():
    """A ``vfl.data.dataset.Dataset`` with three classes (no seed taken: the factory is deterministic)."""
    x = np.tile(np.arange(6, dtype=np.float32), (30, 1))
    y = np.arange(30) % 3
    return Dataset(name="stairs", x_train=x[:24], y_train=y[:24], x_test=x[24:], y_test=y[24:], num_classes=3)


def a_list(**_):
    return [1, 2, 3]


def missing_test(**_):
    return {"x_train": np.zeros((4, 2)), "y_train": np.zeros(4, dtype=int)}


def bad_labels(**_):
    return {"x_train": np.zeros((4, 2)), "y_train": np.array([0, 1, -1, 0]), "x_test": np.zeros((2, 2)),
            "y_test": np.array([0, 1]), "num_classes": 2}


def mismatched(**_):
    return {"x_train": np.zeros((4, 2)), "y_train": np.zeros(3, dtype=int), "x_test": np.zeros((2, 2)),
            "y_test": np.array([0, 1])}


def raises(**_):
    raise RuntimeError("the bucket is empty")
