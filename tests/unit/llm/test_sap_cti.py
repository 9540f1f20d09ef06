"""CTI: UI(t, c) = Σ_{c'≠c} ln p(t|c)/p(t|c'); the selected tokens are the truly class-skewed ones."""

from __future__ import annotations

import numpy as np
import pytest

from parties.llm.sap.cti import (
    class_token_counts,
    contributing_tokens,
    noise_scale,
    utility_importance,
)
from vfl.core.errors import ConfigError

V = 200
SKEWED = {0: [11, 12, 13], 1: [21, 22, 23], 2: [31, 32, 33]}  # each appears mostly in its class


def _corpus(n: int = 600, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    seqs = []
    for y in labels:
        neutral = rng.integers(50, V, 20)  # shared vocabulary, same distribution in every class
        own = rng.choice(SKEWED[int(y)], 2)
        other = rng.choice([t for c, ts in SKEWED.items() if c != y for t in ts], 1) if rng.random() < 0.1 else []
        seqs.append(np.concatenate([[1], neutral, own, other, [2]]).astype(np.int64))  # 1, 2: special tokens
    return seqs, labels


def test_ui_matches_definition():
    seqs, labels = _corpus(60)
    counts = class_token_counts(sequences=seqs, labels=labels, num_classes=3, vocab_size=V)
    ui = utility_importance(counts, smoothing=0.5)
    p = (counts + 0.5) / (counts.sum(1, keepdims=True) + 0.5 * V)
    for c in range(3):
        want = sum(np.log(p[c] / p[o]) for o in range(3) if o != c)
        np.testing.assert_allclose(ui[c], want, rtol=1e-10, atol=1e-10)


def test_picks_the_class_skewed_tokens():
    seqs, labels = _corpus()
    counts = class_token_counts(sequences=seqs, labels=labels, num_classes=3, vocab_size=V, ignore=[1, 2])
    ui = utility_importance(counts)
    total = counts.sum()
    skewed = sorted(t for ts in SKEWED.values() for t in ts)
    share = counts[:, skewed].sum() / total
    chosen = contributing_tokens(ui=ui, counts=counts, fraction=share + 1e-9)
    assert chosen.tolist() == skewed
    assert counts[:, chosen].sum() <= (share + 1e-9) * total
    # with a smaller budget only a subset of the skewed tokens, never a neutral one
    few = contributing_tokens(ui=ui, counts=counts, fraction=share / 2)
    assert 0 < len(few) < len(skewed) and set(few.tolist()) <= set(skewed)
    assert counts[:, few].sum() <= share / 2 * total
    # per class, the top-UI token is one of that class's skewed tokens
    for c, ts in SKEWED.items():
        assert int(np.argmax(ui[c])) in ts


def test_special_tokens_are_never_selected_and_budget_is_respected():
    seqs, labels = _corpus()
    counts = class_token_counts(sequences=seqs, labels=labels, num_classes=3, vocab_size=V, ignore=[1, 2])
    assert counts[:, [1, 2]].sum() == 0
    ui = utility_importance(counts)
    for frac in (0.001, 0.01, 0.05, 0.2):
        chosen = contributing_tokens(ui=ui, counts=counts, fraction=frac)
        assert counts[:, chosen].sum() <= frac * counts.sum()
        assert not set(chosen.tolist()) & {1, 2}


def test_noise_scale_and_bad_options():
    scale = noise_scale(np.array([5, 11, 7, 21]), contributing=np.array([11, 21]), factor=0.25)
    np.testing.assert_array_equal(scale, [1.0, 0.25, 1.0, 0.25])
    counts = np.ones((2, 5), dtype=np.int64)
    with pytest.raises(ConfigError, match="cti_fraction"):
        contributing_tokens(ui=np.zeros((2, 5)), counts=counts, fraction=0.0)
    with pytest.raises(ConfigError, match="cti_smoothing"):
        utility_importance(counts, smoothing=0.0)
