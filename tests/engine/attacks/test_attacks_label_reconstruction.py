"""Label inference from gradient rows and the server's feature-reconstruction decoder (pure functions): the tests through in-process engine runs."""

from __future__ import annotations

import numpy as np
import pytest

from vfl.attacks.label_inference import label_inference

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _binary_gradients(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows of W^T(p - onehot(y)) for a linear 2-class head: ±(1 - p_y)(w0 - w1)."""
    w = rng.normal(size=(2, 8))
    y = rng.integers(0, 2, n)
    p1 = rng.uniform(0.05, 0.95, n)
    delta = np.stack([1 - p1 - (y == 0), p1 - (y == 1)], axis=1)
    return delta @ w / 64, y


def test_gradient_rows_of_a_binary_task_reveal_the_labels():
    rng = np.random.default_rng(0)
    batches = [_binary_gradients(64, rng) for _ in range(8)]
    res = label_inference(batches, window=128, rng=rng)
    assert res["spectral"] > 0.99 and res["cosine"] > 0.99 and res["leak"] > 0.99
    assert res["chance"] < 0.8
