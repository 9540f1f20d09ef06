"""The shared, seeded sample order: every party derives the same minibatch ids from (seed, epoch).

VFL parties hold different features of the SAME samples, so they must agree on which sample ids
form batch t of epoch e without exchanging them. A pure function of (seed, epoch) gives that,
and makes a resumed run replay exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from vfl.core.rng import derive_seed

__all__ = ["Schedule", "batch_ids", "batch_indices", "derive_seed", "epoch_permutation", "num_batches"]


@lru_cache(maxsize=8)
def epoch_permutation(*, num_samples: int, seed: int, epoch: int) -> np.ndarray:
    """Permutation of ``range(num_samples)`` used for ``epoch`` (identical at every party).

    Cached and read-only: every step of an epoch slices the same permutation.
    """
    rng = np.random.default_rng(derive_seed("order", seed, epoch))
    perm = rng.permutation(num_samples)
    perm.flags.writeable = False
    return perm


def num_batches(*, num_samples: int, batch_size: int) -> int:
    """Batches per epoch; the last batch may be smaller (no sample is dropped)."""
    return -(-num_samples // batch_size)


def batch_indices(*, num_samples: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The minibatch sample ids of ``epoch``, in order."""
    perm = epoch_permutation(num_samples=num_samples, seed=seed, epoch=epoch)
    return [perm[i : i + batch_size] for i in range(0, num_samples, batch_size)]


def batch_ids(*, num_samples: int, batch_size: int, seed: int, epoch: int, step: int) -> np.ndarray:
    """Sample ids of batch ``step`` of ``epoch``."""
    perm = epoch_permutation(num_samples=num_samples, seed=seed, epoch=epoch)
    return perm[step * batch_size : (step + 1) * batch_size]


@lru_cache(maxsize=256)
def _train_ids(num_samples: int, batch_size: int, seed: int, epoch: int, step: int) -> np.ndarray:
    """``batch_ids``, cached: every node of a step asks for the same (read-only) slice."""
    return batch_ids(num_samples=num_samples, batch_size=batch_size, seed=seed, epoch=epoch, step=step)


@dataclass(frozen=True)
class Schedule:
    """What every node knows of the batch schedule; batch ids are derived, never sent."""

    seed: int
    num_train: int
    num_test: int
    batch_size: int
    eval_batch_size: int

    @property
    def steps(self) -> int:
        return num_batches(num_samples=self.num_train, batch_size=self.batch_size)

    @property
    def eval_steps(self) -> int:
        return num_batches(num_samples=self.num_test, batch_size=self.eval_batch_size)

    def train_ids(self, epoch: int, step: int) -> np.ndarray:
        return _train_ids(self.num_train, self.batch_size, self.seed, epoch, step)

    def test_ids(self, step: int) -> np.ndarray:
        return np.arange(step * self.eval_batch_size, min((step + 1) * self.eval_batch_size, self.num_test))
