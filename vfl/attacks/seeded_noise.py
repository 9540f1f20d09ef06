"""What an attacker holding the run seed can do when ``privacy.noise_rng: seeded``: regenerate the noise.

The seeded recipe is public by construction: ``NoiseSource.for_round("seeded", seed=, purpose=,
node=, phase=, epoch=, step=)`` (purposes "pbm", "ldp", ...; ``node`` is the sending party's node
id). So the server can redraw a party's Gaussian noise and subtract it, or redraw the keystream
words behind its binomial coins and test which input explains the counts it received. This is
why a seeded run's ε is not a guarantee, and why the audit may then exceed the accountant.
"""

from __future__ import annotations

import numpy as np

from vfl.rng import NoiseSource

_TWO32 = float(1 << 32)


def round_source(*, seed: int, purpose: str, node: int, phase: str, epoch: int, step: int) -> NoiseSource:
    """The exact noise stream the sending node used in that round under ``noise_rng: seeded``."""
    return NoiseSource.for_round("seeded", seed=seed, purpose=purpose, node=node, phase=phase, epoch=epoch, step=step)


def regenerate_normal(source: NoiseSource, shape: tuple[int, ...]) -> np.ndarray:
    """The standard Gaussians a ``NoiseSource.normal(shape)`` draw produced (float64)."""
    import torch

    return source.normal(shape, dtype=torch.float64).numpy()  # type: ignore[no-any-return]


def regenerate_words(source: NoiseSource, *, n: int, trials: int) -> np.ndarray:
    """(n, trials) keystream words behind ``NoiseSource.binomial(trials, p)`` of n probabilities."""
    return source.words(n * trials).reshape(n, trials)


def coin_threshold(p: np.ndarray) -> np.ndarray:
    """The integer thresholds ``NoiseSource.binomial`` compares each word with (rounded towards 1/2)."""
    scaled = np.asarray(p, np.float64) * _TWO32
    thr = np.where(scaled >= _TWO32 / 2, np.floor(scaled), np.ceil(scaled))
    return np.clip(thr, 0, _TWO32).astype(np.uint64)  # type: ignore[no-any-return]


def counts_given(words: np.ndarray, p: np.ndarray | float) -> np.ndarray:
    """The binomial counts these words give for success probabilities ``p`` (one per row)."""
    thr = coin_threshold(np.broadcast_to(np.asarray(p, np.float64), (len(words),)))
    return (words.astype(np.uint64) < thr[:, None]).sum(axis=1)  # type: ignore[no-any-return]
