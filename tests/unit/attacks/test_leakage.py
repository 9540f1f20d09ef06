"""Label-leakage metrics: ≈1 on label-separable observations, ≈0.5 on label-independent noise."""

from __future__ import annotations

import numpy as np
import pytest

from vfl.attacks.leakage import kmeans_accuracy, leak_metrics, norm_auc, spectral_auc, windowed_leak
from vfl.core.errors import DataError


def separable(n: int = 400, d: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Class 0 near the origin, class 1 around a far center: separable by direction, norm and clusters."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    center = np.zeros(d)
    center[0] = 3.0
    return rng.normal(0, 0.1, (n, d)) + y[:, None] * center, y


def test_separable_observations_leak_everything():
    x, y = separable()
    m = leak_metrics(x, y, rng=np.random.default_rng(1))
    for key in ("spectral", "norm", "kmeans", "leak"):
        assert m[key] == pytest.approx(1.0, abs=1e-9), key


def test_flipped_labels_leak_just_as_much():
    """The attacker does not know which cluster is which label: the metrics are symmetric."""
    x, y = separable()
    assert spectral_auc(x, 1 - y) == pytest.approx(1.0)
    assert norm_auc(x, 1 - y) == pytest.approx(1.0)
    assert kmeans_accuracy(x, 1 - y, rng=np.random.default_rng(2)) == pytest.approx(1.0)


def test_label_independent_noise_leaks_nothing():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(3000, 32)), rng.integers(0, 2, 3000)
    m = leak_metrics(x, y, rng=rng)
    for key in ("spectral", "norm", "kmeans", "leak"):
        assert 0.5 <= m[key] < 0.54, (key, m[key])


def test_sign_leak_along_one_direction():
    """Gradients of binary CE with a linear head: ±(p − y)·Δw, the sign tells the label."""
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 500)
    p = rng.uniform(0.2, 0.8, 500)
    dw = rng.normal(size=24)
    g = (p - y)[:, None] * dw + rng.normal(0, 1e-3, (500, 24))
    assert spectral_auc(g, y) == pytest.approx(1.0)
    assert kmeans_accuracy(g, y, rng=rng) > 0.95


def test_three_classes():
    rng = np.random.default_rng(5)
    y = rng.integers(0, 3, 300)
    centers = rng.normal(0, 5, (3, 8))
    x = centers[y] + rng.normal(0, 0.1, (300, 8))
    assert kmeans_accuracy(x, y, rng=rng) == pytest.approx(1.0)
    assert spectral_auc(x, y) > 0.9  # one-vs-rest, best class


def test_windows_take_the_worst_stretch():
    rng = np.random.default_rng(6)
    noise_x, noise_y = rng.normal(size=(400, 8)), rng.integers(0, 2, 400)
    sep_x, sep_y = separable(200, 8, seed=7)
    x, y = np.concatenate([noise_x, sep_x]), np.concatenate([noise_y, sep_y])
    assert windowed_leak(x, y, window=200, rng=rng)["leak"] == pytest.approx(1.0)
    assert leak_metrics(x, y, rng=rng)["spectral"] < 0.95  # pooled over everything it is diluted


def test_degenerate_inputs():
    y = np.array([0, 1, 0, 1])
    assert spectral_auc(np.zeros((4, 3)), y) == 0.5
    assert np.isnan(norm_auc(np.ones((4, 3)), np.zeros(4)))  # one class: nothing to rank
    with pytest.raises(DataError):
        spectral_auc(np.zeros((4, 3)), np.zeros(5))
