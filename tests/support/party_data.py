"""Test helpers for per-party files: write them from an in-memory dataset, join them omnisciently,
and build the in-memory twin of an aligned run (same rows in the same order)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from simulations.data.party_tables import PartyTableSource
from simulations.data.split_parties import ID, LABEL, SPLIT, export
from tests.support.helpers import BlobSource
from vfl.config.party_files import LabelFile, PartyFile
from vfl.data.dataset import Dataset, LabelShard, PartyShard


def write_blob_parties(out: Path, *, num_parties: int = 3, overlap: float = 0.7, seed: int = 0,
                       num_train: int = 240, num_test: int = 60) -> tuple[PartyTableSource, BlobSource]:
    """Blobs split over ``num_parties`` files with a partial, shuffled overlap; returns the source."""
    blobs = BlobSource(num_parties=num_parties, num_train=num_train, num_test=num_test, seed=seed)
    shards, labels = blobs.partition()
    export(shards, labels, out, overlap=overlap, seed=seed, name="blobs")
    return source(out, num_parties), blobs


def source(out: Path, num_parties: int, *, split: str | None = SPLIT) -> PartyTableSource:
    parties = tuple(PartyFile(path=str(out / f"party{i}.csv"), id=ID) for i in range(num_parties))
    return PartyTableSource.from_files(parties, LabelFile(path=str(out / "labels.csv"), id=ID, label=LABEL,
                                                          split=split))


def all_ids(out: Path, num_parties: int) -> tuple[set[str], set[str]]:
    """(every ID in any file, the IDs in every file) — what only an omniscient observer knows."""
    sets = [set(pd.read_csv(out / f"party{i}.csv", dtype={ID: str})[ID]) for i in range(num_parties)]
    sets.append(set(pd.read_csv(out / "labels.csv", dtype={ID: str})[ID]))
    return set().union(*sets), set.intersection(*sets)


@dataclass(frozen=True)
class JoinedSource:
    """The intersection joined by ID, in the aligned order (sorted IDs, train then test)."""

    shards: list[PartyShard]
    labels: LabelShard
    num_parties: int

    def dataset(self) -> Dataset:
        raise NotImplementedError

    def partition(self) -> tuple[list[PartyShard], LabelShard]:
        return self.shards, self.labels


def joined(out: Path, num_parties: int) -> JoinedSource:
    lab = pd.read_csv(out / "labels.csv", dtype={ID: str})
    frames = [pd.read_csv(out / f"party{i}.csv", dtype={ID: str}) for i in range(num_parties)]
    common = sorted(set(lab[ID]).intersection(*[set(f[ID]) for f in frames]))
    lab = lab.set_index(ID).loc[common]
    test = (lab[SPLIT] == "test").to_numpy()
    shards = []
    for i, f in enumerate(frames):
        x = f.set_index(ID).loc[common].to_numpy(dtype=np.float32)
        shards.append(PartyShard(i, x[~test], x[test]))
    y = lab[LABEL].to_numpy(dtype=np.int64)
    return JoinedSource(shards, LabelShard(y[~test], y[test], int(y.max()) + 1), num_parties)
