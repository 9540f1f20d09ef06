"""SanText token substitution (Yue et al., ACL Findings 2021, arXiv:2106.01221): a local-DP baseline for
text that replaces each token ``x`` by ``y`` drawn with probability ∝ exp(−ε·‖e_x − e_y‖ / 2) over the
vocabulary embedding table (the exponential mechanism with the Euclidean embedding distance).

Guarantee: ε·d_χ metric LDP per token — for any x, x', y: P(y|x) / P(y|x') ≤ exp(ε·‖e_x − e_x'‖)
(ε/2 from the numerator, ε/2 from the normaliser). A text of n tokens composes to n·ε·d. The
distances are those of the public embedding table, so the guarantee holds whatever the model.
Sampling by inverse CDF with one keystream uniform per token (``vfl.core.rng.NoiseSource``).
"""

from __future__ import annotations

import numpy as np
import torch

from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource


def santext_probs(rows: torch.Tensor, *, table: torch.Tensor, epsilon: float) -> torch.Tensor:
    """(k, V) substitution probabilities of the table rows ``rows`` (distances in float32, softmax in float64)."""
    t = table.detach().float()
    x = t[rows]
    d2 = ((x * x).sum(1, keepdim=True) - 2.0 * x @ t.T + (t * t).sum(1).unsqueeze(0)).clamp_min(0.0).double()
    d2[torch.arange(len(rows)), rows] = 0.0  # exact zero to itself (no rounding residue)
    return torch.softmax(-0.5 * epsilon * d2.sqrt(), dim=1)


def santext(ids: np.ndarray, *, table: torch.Tensor, epsilon: float, noise: NoiseSource,
            keep: tuple[int, ...] = (), chunk: int = 256) -> np.ndarray:
    """Token ids (any shape) with every id not in ``keep`` (special tokens, padding) replaced by a SanText draw."""
    if not epsilon > 0 or not np.isfinite(epsilon):
        raise ConfigError("params.santext_epsilon", f"got {epsilon!r}; allowed: a finite value > 0")
    flat = np.asarray(ids, dtype=np.int64).reshape(-1)
    out = flat.copy()
    todo = np.flatnonzero(~np.isin(flat, np.asarray(keep, dtype=np.int64)))
    u = noise.uniform((len(todo),)).numpy()
    uniq, inverse = np.unique(flat[todo], return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    for start in range(0, len(uniq), chunk):
        block = uniq[start : start + chunk]
        cdf = torch.cumsum(santext_probs(torch.as_tensor(block), table=table, epsilon=epsilon), dim=1).cpu().numpy()
        for j in range(len(block)):
            at = order[bounds[start + j] : bounds[start + j + 1]]
            pos = np.searchsorted(cdf[j], u[at] * cdf[j, -1], side="right")
            out[todo[at]] = np.minimum(pos, cdf.shape[1] - 1)
    return out.reshape(np.shape(ids))
