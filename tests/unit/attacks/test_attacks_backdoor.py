"""Gradient-replacement backdoor pieces (Liu, Yi & Chen 2020): design, trigger, replacement, ASR."""

from __future__ import annotations

import numpy as np

from vfl.attacks.backdoor import (
    attack_success_rate,
    backdoor_design,
    pair_targets,
    replace_gradients,
    stamp_trigger,
)


def test_design_uses_known_targets_and_label_blind_poison():
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0] * 10)
    known, poison = backdoor_design(y_train=y, target=0, known=5, poison=20, seed=0)
    assert len(known) == 5 and np.all(y[known] == 0)
    assert len(poison) == 20 and not set(known) & set(poison)
    again = backdoor_design(y_train=y, target=0, known=5, poison=20, seed=0)
    assert np.array_equal(known, again[0]) and np.array_equal(poison, again[1])


def test_poison_rows_get_the_amplified_gradient_of_their_paired_target():
    pairs = pair_targets(np.array([3, 7]), np.array([10, 11]))
    assert pairs == {3: 10, 7: 11}
    saved: dict[int, np.ndarray] = {}
    g1 = np.arange(12, dtype=np.float32).reshape(4, 3)
    out1 = replace_gradients(g1, np.array([3, 5, 7, 10]), pairs=pairs, saved=saved, gamma=10.0)
    assert np.array_equal(out1[3], 10 * g1[0])  # poison 10 paired with target 3, seen in the same batch
    assert np.array_equal(out1[:3], g1[:3]) and set(saved) == {3, 7}
    g2 = np.ones((2, 3), dtype=np.float32)
    out2 = replace_gradients(g2, np.array([11, 4]), pairs=pairs, saved=saved, gamma=2.0)
    assert np.array_equal(out2[0], 2 * g1[2]) and np.array_equal(out2[1], g2[1])


def test_trigger_and_success_rate():
    x = np.zeros((3, 2, 2))
    t = stamp_trigger(x, size=2, value=5.0)
    assert t.reshape(3, -1)[:, -2:].min() == 5.0 and t.reshape(3, -1)[:, :2].max() == 0.0 and x.max() == 0
    assert attack_success_rate(np.array([0, 0, 1, 0]), np.array([1, 2, 1, 0]), target=0) == 2 / 3
