"""Backdoor by a malicious passive party: gradient replacement — Liu, Yi & Chen, "Backdoor attacks and
defenses in feature-partitioned collaborative learning" (arXiv 2007.03608, 2020).

Threat model: one passive party, no labels, honest protocol otherwise. Auxiliary knowledge: a few
training samples known to be of the target class (``known``). It stamps a trigger into its own
features of some training samples (``poison``) and pairs every known target sample with a poison
sample. Forward: in the slot of a known target sample it sends the embedding of its paired
poisoned sample, so the server learns "this embedding -> target". Backward: it keeps the gradient
the server returned for the target sample and applies it, amplified by γ, to the paired poison
sample instead of that sample's own gradient, so its bottom learns to map the trigger to where the
target class lives. At test time the trigger in its features alone should flip the prediction.

Scores: attack success rate (ASR: triggered non-target test samples predicted as the target),
beside the chance baseline (the same samples without the trigger predicted as the target), and
clean accuracy. The pure pieces live here; the party is ``parties.attacks.nodes``.
"""

from __future__ import annotations

import numpy as np

from vfl.core.errors import DataError
from vfl.core.rng import seeded_numpy


def backdoor_design(*, y_train: np.ndarray, target: int, known: int, poison: int,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(known target-class ids: the attacker's auxiliary labels, poison ids: random, label-blind)."""
    y = np.asarray(y_train)
    pool = np.flatnonzero(y == target)
    if len(pool) == 0:
        raise DataError(f"attack.backdoor_target: no training sample of class {target}")
    rng = seeded_numpy("backdoor", seed)
    known_ids = np.sort(rng.choice(pool, size=min(known, len(pool)), replace=False))
    rest = np.setdiff1d(np.arange(len(y)), known_ids)
    poison_ids = np.sort(rng.choice(rest, size=min(poison, len(rest)), replace=False))
    return known_ids, poison_ids


def stamp_trigger(x: np.ndarray, *, size: int, value: float) -> np.ndarray:
    """A copy of ``x`` (N, ...) whose last ``size`` features (row-major) are set to ``value``."""
    out = np.array(x, dtype=np.float32, copy=True)
    flat = out.reshape(len(out), -1)
    if size > flat.shape[1]:
        raise DataError(f"attack.backdoor_trigger_size: {size} > the party's {flat.shape[1]} features")
    flat[:, flat.shape[1] - size :] = value
    return out


def pair_targets(known_ids: np.ndarray, poison_ids: np.ndarray) -> dict[int, int]:
    """Known target id -> paired poison id (round robin over the poison samples)."""
    return {int(t): int(poison_ids[i % len(poison_ids)]) for i, t in enumerate(known_ids)}


def replace_gradients(grad: np.ndarray, batch: np.ndarray, *, pairs: dict[int, int], saved: dict[int, np.ndarray],
                      gamma: float) -> np.ndarray:
    """Save the rows of known target samples into ``saved``; give each poison row γ × its target's saved row."""
    g = np.array(grad, dtype=np.float32, copy=True).reshape(len(batch), -1)
    for r, sid in enumerate(batch):
        if int(sid) in pairs:
            saved[int(sid)] = g[r].copy()
    by_poison: dict[int, int] = {}
    for t, p in pairs.items():
        if t in saved:
            by_poison[p] = t
    for r, sid in enumerate(batch):
        if int(sid) in by_poison:
            g[r] = gamma * saved[by_poison[int(sid)]]
    return g.reshape(np.shape(grad))


def attack_success_rate(pred: np.ndarray, y: np.ndarray, *, target: int) -> float:
    """Share of non-target samples predicted as ``target``."""
    keep = np.asarray(y) != target
    return float((np.asarray(pred)[keep] == target).mean()) if keep.any() else float("nan")
