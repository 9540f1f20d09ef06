"""The run's data source: loads and partitions the configured dataset where it is used.

Each host (Ray actor) builds the same ``ConfigDataSource`` and reads the data from local disk
or an installed package itself; only the small config travels to the actor. Results are
cached per process so the parties sharing an actor share one copy of the arrays.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from vfl.data import Dataset, LabelShard, PartyShard
from vfl.sampling import derive_seed
from vfl.schema import RunConfig

_CACHE: dict[str, Any] = {}


@dataclass(frozen=True)
class ConfigDataSource:
    dataset_name: str
    num_parties: int
    partition_scheme: str
    seed: int = 0
    data_dir: str | None = None
    partition_opts: dict[str, Any] = field(default_factory=dict)
    load_opts: dict[str, Any] = field(default_factory=dict)
    train_subsample: int | None = None
    test_subsample: int | None = None

    @classmethod
    def from_config(cls, cfg: RunConfig) -> ConfigDataSource:
        d = cfg.data
        return cls(dataset_name=cfg.dataset, num_parties=cfg.num_parties, partition_scheme=d.partition,
                   seed=cfg.seed, data_dir=d.data_dir, partition_opts=dict(d.partition_opts), load_opts=dict(d.load_opts),
                   train_subsample=d.train_subsample, test_subsample=d.test_subsample)

    def _key(self, what: str) -> str:
        return what + json.dumps(asdict(self), sort_keys=True, default=str)

    def dataset(self) -> Dataset:
        key = self._key("dataset")
        if key not in _CACHE:
            from simulations.data.registry import load_dataset

            ds = load_dataset(self.dataset_name, data_dir=self.data_dir, seed=self.seed, **self.load_opts)
            _CACHE[key] = subsample(ds, train=self.train_subsample, test=self.test_subsample, seed=self.seed)
        return _CACHE[key]  # type: ignore[no-any-return]

    def partition(self) -> tuple[list[PartyShard], LabelShard]:
        key = self._key("partition")
        if key not in _CACHE:
            from simulations.data.partition import partition

            _CACHE[key] = partition(self.dataset(), num_parties=self.num_parties, scheme=self.partition_scheme,
                                    seed=self.seed, **self.partition_opts)
        return _CACHE[key]  # type: ignore[no-any-return]


def subsample(ds: Dataset, *, train: int | None, test: int | None, seed: int) -> Dataset:
    """A seeded subset of the train/test splits (for quick runs); the full set when ``None``."""

    def pick(n_total: int, n: int | None, what: str) -> np.ndarray | None:
        if n is None or n >= n_total:
            return None
        rng = np.random.default_rng(derive_seed("subsample", what, seed))
        return np.sort(rng.choice(n_total, size=n, replace=False))

    tr, te = pick(ds.num_train, train, "train"), pick(ds.num_test, test, "test")
    if tr is None and te is None:
        return ds
    extras = {}
    n_tr, n_te = ds.num_train, ds.num_test
    for key, col in ds.extras.items():  # per-sample columns: <key>_train, <key>_test, <key> = train then test
        if key.endswith("_train") and len(col) == n_tr:
            extras[key] = col if tr is None else col[tr]
        elif key.endswith("_test") and len(col) == n_te:
            extras[key] = col if te is None else col[te]
        elif len(col) == n_tr + n_te:
            a, b = col[:n_tr], col[n_tr:]
            extras[key] = np.concatenate([a if tr is None else a[tr], b if te is None else b[te]])
        else:
            extras[key] = col
    return replace(
        ds,
        x_train=ds.x_train if tr is None else ds.x_train[tr], y_train=ds.y_train if tr is None else ds.y_train[tr],
        x_test=ds.x_test if te is None else ds.x_test[te], y_test=ds.y_test if te is None else ds.y_test[te],
        extras=extras,
    )
