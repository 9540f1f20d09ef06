"""What an attacker holding the run seed can do when ``privacy.noise_rng: seeded``: regenerate the noise.

The seeded recipe is public by construction: ``NoiseSource.for_round("seeded", seed=, purpose=,
node=, phase=, epoch=, step=)`` (purposes "pbm", "ldp", ...; ``node`` is the sending party's node
id). So the server can redraw a party's Gaussian noise and subtract it, or re-run the binomial
sampler on the same stream under each hypothesis and see which input explains the counts it
received. This is why a seeded run's ε is not a guarantee, and why the audit may then exceed it.
"""

from __future__ import annotations

import numpy as np

from vfl.core.rng import NoiseSource


def round_source(*, seed: int, purpose: str, node: int, phase: str, epoch: int, step: int) -> NoiseSource:
    """The exact noise stream the sending node used in that round under ``noise_rng: seeded``."""
    return NoiseSource.for_round("seeded", seed=seed, purpose=purpose, node=node, phase=phase, epoch=epoch, step=step)


def regenerate_normal(source: NoiseSource, shape: tuple[int, ...]) -> np.ndarray:
    """The standard Gaussians a ``NoiseSource.normal(shape)`` draw produced (float64)."""
    import torch

    return source.normal(shape, dtype=torch.float64).numpy()  # type: ignore[no-any-return]


def regenerate_discrete_gaussian(source: NoiseSource, *, sigma: float, c: float, shape: tuple[int, ...]) -> np.ndarray:
    """The grid noise a ``discrete_gaussian_perturb`` draw added, in embedding units (z·c/L, float64)."""
    from vfl.privacy.mechanisms.discrete_gaussian import discrete_gaussian
    from vfl.privacy.mechanisms.gaussian import ldp_grid

    levels, sigma2 = ldp_grid(sigma=sigma, c=c)
    z = discrete_gaussian(source, sigma2=sigma2, size=int(np.prod(shape)))
    return z.reshape(shape).astype(np.float64) * (float(c) / levels)  # type: ignore[no-any-return]


def regenerate_binomial(source: NoiseSource, *, trials: int, p: np.ndarray | float, shape: tuple[int, ...]) -> np.ndarray:
    """Re-run the mechanism's own sampler on the regenerated stream under a hypothesis ``p``.

    The coins are U < T(p) for the same keystream U, so counts are monotone in p and equal to what
    the party drew wherever its p was the hypothesised one (the sampler is reused, never re-implemented).
    """
    import torch

    probs = torch.from_numpy(np.broadcast_to(np.asarray(p, np.float64), shape).copy())
    return source.binomial(int(trials), probs).numpy()  # type: ignore[no-any-return]
