"""Dataset containers shared by loaders, partitioners and parties.

A ``Dataset`` holds the full sample-aligned arrays as a loader read them; a partitioner turns it
into one ``PartyShard`` per passive party (its vertical slice) and one ``LabelShard`` for the
server. Everything is indexed by the same sample ids, so a shared batch order aligns parties.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from vfl.core.errors import DataError

Modality = Literal["tabular", "image", "multiview", "text"]
Metric = Literal["accuracy", "auprc"]


@dataclass(frozen=True)
class Dataset:
    """Full train/test arrays of one dataset, before vertical partitioning.

    ``x_*`` layouts by modality: tabular ``(N, F)`` float32; image ``(N, C, H, W)`` float32;
    multiview ``(N, V, C, H, W)`` float32; text: 1-D object array of ``str``.
    ``y_*`` are int64 class ids in ``[0, num_classes)``.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    modality: Modality = "tabular"
    metric: Metric = "accuracy"
    class_names: tuple[str, ...] = ()
    extras: dict[str, np.ndarray] = field(default_factory=dict)  # e.g. a private attribute column

    def __post_init__(self) -> None:
        if len(self.x_train) != len(self.y_train):
            raise DataError(f"{self.name}: {len(self.x_train)} train inputs but {len(self.y_train)} labels")
        if len(self.x_test) != len(self.y_test):
            raise DataError(f"{self.name}: {len(self.x_test)} test inputs but {len(self.y_test)} labels")
        if self.num_classes < 2:
            raise DataError(f"{self.name}: needs at least 2 classes, got {self.num_classes}")

    @property
    def num_train(self) -> int:
        return len(self.y_train)

    @property
    def num_test(self) -> int:
        return len(self.y_test)


@dataclass(frozen=True)
class PartyShard:
    """One passive party's vertical slice of the train and test inputs (same sample order)."""

    party: int
    x_train: np.ndarray
    x_test: np.ndarray
    description: str = ""

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


@dataclass(frozen=True)
class LabelShard:
    """What the server (active party) holds: the labels and the task's metadata."""

    y_train: np.ndarray
    y_test: np.ndarray
    num_classes: int
    metric: Metric = "accuracy"


class DataSource(Protocol):
    """Loads a run's data where it is used (inside each host), so raw data never crosses the wire."""

    def dataset(self) -> Dataset:
        """The full dataset (cached per process)."""
        ...

    def partition(self) -> tuple[list[PartyShard], LabelShard]:
        """Vertical shards for every party and the server's labels (cached per process)."""
        ...


@dataclass(frozen=True)
class KeyedTable:
    """One party's own table as read from its file: sample IDs and numeric features, in file order."""

    source: str  # the file (for error messages)
    ids: np.ndarray  # (n,) object array of str, unique
    x: np.ndarray  # (n, F) float32
    columns: tuple[str, ...]
    standardize: bool = False


@dataclass(frozen=True)
class KeyedLabels:
    """The label holder's table: sample IDs, class ids, and the train/test split if the file gives one."""

    source: str
    ids: np.ndarray  # (n,) object array of str, unique
    y: np.ndarray  # (n,) int64 in [0, num_classes)
    num_classes: int
    is_test: np.ndarray | None = None  # (n,) bool from the file's split column; None = the label holder draws a label-blind uniform split (vfl.data.psi)
    test_fraction: float = 0.25
    class_names: tuple[str, ...] = ()
    metric: Metric = "accuracy"


@runtime_checkable
class KeyedDataSource(Protocol):
    """Per-party files: each host reads only the tables of the nodes it runs; rows are aligned by
    private set intersection in the setup phase (nobody, the driver included, loads the others)."""

    num_parties: int

    def party_table(self, index: int) -> KeyedTable:
        """Passive party ``index``'s own table."""
        ...

    def label_table(self) -> KeyedLabels:
        """The label holder's table."""
        ...
