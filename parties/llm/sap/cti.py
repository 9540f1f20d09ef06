"""Contributing-token identification (SAP §4.4): the class-skewed tokens that get reduced noise.

UI(t, c) = Σ_{c' ≠ c} ln p(t|c) / p(t|c') with Laplace-smoothed per-class token frequencies.
For every class the tokens are ranked by UI; the largest k is taken such that the union of the
per-class top-k covers at most ``fraction`` of all token occurrences of the training set.
Runs on the customer (it needs the labels); nothing here crosses the wire.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from vfl.core.errors import ConfigError


def class_token_counts(*, sequences: Sequence[np.ndarray], labels: np.ndarray, num_classes: int,
                       vocab_size: int, ignore: Iterable[int] = ()) -> np.ndarray:
    """(C, V) occurrence counts of every token id per class (``ignore``: special tokens)."""
    if len(sequences) != len(labels):
        raise ValueError(f"{len(sequences)} sequences but {len(labels)} labels")
    counts = np.zeros((num_classes, vocab_size), dtype=np.int64)
    for seq, y in zip(sequences, labels, strict=True):
        np.add.at(counts[int(y)], np.asarray(seq, dtype=np.int64), 1)
    skip = np.fromiter(ignore, dtype=np.int64)
    counts[:, skip] = 0
    return counts


def utility_importance(counts: np.ndarray, *, smoothing: float = 1.0) -> np.ndarray:
    """(C, V) UI(t, c) = Σ_{c'≠c} ln p(t|c)/p(t|c') = C·ln p(t|c) − Σ_{c'} ln p(t|c')."""
    if smoothing <= 0:
        raise ConfigError("params.cti_smoothing", f"got {smoothing}; must be > 0 (log of zero counts)")
    c, v = counts.shape
    logp = np.log(counts + smoothing) - np.log(counts.sum(1, keepdims=True) + smoothing * v)
    return c * logp - logp.sum(0, keepdims=True)  # type: ignore[no-any-return]


def contributing_tokens(*, ui: np.ndarray, counts: np.ndarray, fraction: float = 0.01) -> np.ndarray:
    """Sorted token ids: union of per-class top-k by UI, k maximal with coverage ≤ ``fraction``.

    Coverage is the share of all token occurrences (``counts.sum()``) held by the selected tokens;
    tokens that never occur are never selected.
    """
    if not 0 < fraction <= 1:
        raise ConfigError("params.cti_fraction", f"got {fraction}; allowed: a value in (0, 1]")
    per_token = counts.sum(0)
    budget = fraction * per_token.sum()
    ranked = np.argsort(-np.where(per_token > 0, ui, -np.inf), axis=1, kind="stable")  # (C, V)
    chosen: set[int] = set()
    covered = 0
    for rank in range(int((per_token > 0).sum())):
        new = {int(t) for t in ranked[:, rank] if per_token[t] > 0} - chosen
        extra = int(sum(per_token[t] for t in new))
        if covered + extra > budget:
            break
        chosen |= new
        covered += extra
    return np.array(sorted(chosen), dtype=np.int64)


def noise_scale(sequences_ids: np.ndarray, *, contributing: np.ndarray, factor: float) -> np.ndarray:
    """Per-token noise multiplier: ``factor`` on contributing tokens, 1 elsewhere."""
    scale = np.ones(len(sequences_ids), dtype=np.float32)
    scale[np.isin(sequences_ids, contributing)] = factor
    return scale
