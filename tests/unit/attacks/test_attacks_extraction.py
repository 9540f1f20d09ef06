"""Rolnick & Kording first-layer extraction of a random ReLU network from queries."""

from __future__ import annotations

import numpy as np
import pytest

from vfl.attacks import extraction
from vfl.attacks.extraction import (
    CountingOracle,
    extract_first_layer,
    match_neurons,
    points_on_line,
)


def _relu_net(seed: int, sizes: tuple[int, ...]) -> tuple[list[tuple[np.ndarray, np.ndarray]], object]:
    rng = np.random.default_rng(seed)
    layers = [(rng.normal(size=(o, i)) / np.sqrt(i), rng.normal(scale=0.3, size=o)) for i, o in zip(sizes, sizes[1:], strict=False)]

    def f(x: np.ndarray) -> np.ndarray:
        h = x
        for k, (w, b) in enumerate(layers):
            h = h @ w.T + b
            if k < len(layers) - 1:
                h = np.maximum(h, 0.0)
        return h

    return layers, f


def test_bends_along_a_line_are_the_first_layer_crossings_of_a_one_layer_net():
    layers, f = _relu_net(0, (10, 16, 3))
    (w, b), _ = layers
    rng = np.random.default_rng(1)
    a, v = rng.normal(size=10), rng.normal(size=10)
    v /= np.linalg.norm(v)
    t_true = np.sort(-(w @ a + b) / (w @ v))
    t_true = t_true[np.abs(t_true) < 4]
    found = points_on_line(f, a, v, -4, 4, tol=1e-7)
    assert len(found) == len(t_true)
    assert np.allclose(found, t_true, atol=1e-5)


def test_recovers_at_least_90_percent_of_a_random_width_16_network():
    layers, f = _relu_net(2, (10, 16, 16, 4))
    oracle = CountingOracle(f)
    normals, offsets = extract_first_layer(oracle, dim=10, radius=5.0, lines=12, rng=np.random.default_rng(3))
    w, b = layers[0]
    res = match_neurons(w, b, normals, offsets)
    assert res["recovered"] >= 0.9 and res["mean_cosine"] > 0.99
    assert res["precision"] >= 0.8  # deeper-layer boundaries are mostly rejected by the hyperplane test
    assert oracle.queries > 0
    other_w, other_b = _relu_net(9, (10, 16, 4))[0][0]  # a network it never queried: nothing matches
    assert match_neurons(other_w, other_b, normals, offsets)["recovered"] < 0.2


def test_the_hyperplane_test_accepts_a_true_plane_however_exactly_its_normal_is_known():
    """A first-layer plane passes the test whether its normal is exact or off by rounding. The old
    probe window, symmetric about the plane, put the bend on an edge of every bisection grid, where it
    is invisible: a true plane passed only when the normal's estimation error (finite differences,
    ~1e-9, set by the machine's BLAS rounding) moved the bend inside a segment -- 0 of 16 exact planes
    passed, and the width-16 extraction lost a neuron on another machine (cosine 0.971)."""
    layers, f = _relu_net(2, (10, 16, 16, 4))
    w, b = layers[0]
    rng = np.random.default_rng(0)
    for error in (0.0, 1e-12, 1e-9):
        passed = []
        for wj, bj in zip(w, b, strict=True):
            n = wj / np.linalg.norm(wj) + error * rng.normal(size=len(wj))
            n /= np.linalg.norm(n)
            c = float(bj / np.linalg.norm(wj))
            passed.append(extraction.test_hyperplane(f, n, c, -c * n, radius=5.0, rng=rng))
        assert len(passed) == 16 and np.mean(passed) >= 15 / 16, (error, passed)


def _saturated(seed: int):
    """A width-16 ReLU net under a C·tanh whose outputs reach |y| ~ 1 - 1e-7 (where atanh is noisy)."""
    layers, g = _relu_net(seed, (10, 16, 4))
    return layers, (lambda x: 4.0 * np.tanh(6.0 * g(x)))


def test_a_line_through_a_saturated_tanh_is_noise_without_the_clamp_and_clean_with_it():
    layers, y = _saturated(5)
    (w, b), _ = layers
    rng = np.random.default_rng(0)
    a, v = rng.normal(size=10), rng.normal(size=10)
    v /= np.linalg.norm(v)
    z = 6.0 * _relu_net(5, (10, 16, 4))[1](a + np.linspace(-5, 5, 1001)[:, None] * v)
    assert np.abs(np.tanh(z)).max() > 1 - 1e-6 and (np.abs(z) < 18).all()  # saturated, not exactly +-1
    noisy = CountingOracle(lambda x: extraction.untanh(y(x), c=4.0, saturation=1e-15), limit=2_000_000)
    with pytest.raises(extraction.NoisyLine):  # the old clamp: rounding read as bends
        points_on_line(noisy, a, v, -5, 5, tol=5e-7)
    control = CountingOracle(noisy.f, limit=2_000_000)
    with pytest.raises(extraction.BudgetSpent):  # and without the cap it bisects the noise past 2M queries
        points_on_line(control, a, v, -5, 5, tol=5e-7, max_live=None)
    clean = CountingOracle(lambda x: extraction.untanh(y(x), c=4.0))
    found = points_on_line(clean, a, v, -5, 5, tol=5e-7)
    t_true = np.sort(-(w @ a + b) / (w @ v))
    t_true = t_true[np.abs(t_true) < 5]
    assert all(np.abs(found - t).min() < 1e-5 for t in t_true)  # every first-layer crossing is found
    assert clean.queries < 50_000


def test_extraction_through_a_saturated_tanh_recovers_the_layer_within_a_bounded_budget():
    layers, y = _saturated(5)
    got = extraction.extract(lambda x: extraction.untanh(y(x), c=4.0), dim=10, radius=5.0, lines=12,
                             rng=np.random.default_rng(3), max_queries=1_000_000)
    w, b = layers[0]
    assert got.noisy_lines == 0 and got.lines_done == 12 and got.queries < 1_000_000
    assert match_neurons(w, b, got.normals, got.offsets)["recovered"] >= 0.9


def test_extraction_stops_at_its_query_budget_and_keeps_what_it_found():
    layers, f = _relu_net(2, (10, 16, 16, 4))
    full = extraction.extract(f, dim=10, radius=5.0, lines=12, rng=np.random.default_rng(3))
    cut = extraction.extract(f, dim=10, radius=5.0, lines=12, rng=np.random.default_rng(3), max_queries=full.queries // 3)
    assert full.lines_done == 12 and 0 < cut.lines_done < 12
    assert full.queries // 3 < cut.queries <= full.queries // 3 + 2000  # at most the call that crossed it
    assert 0 < len(cut.normals) < len(full.normals)
    assert np.allclose(cut.normals, full.normals[:len(cut.normals)])  # a prefix of the same run
