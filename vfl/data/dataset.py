"""Dataset containers shared by loaders, partitioners and parties.

A ``Dataset`` holds the full sample-aligned arrays as a loader read them; a partitioner turns it
into one ``PartyShard`` per passive party (its vertical slice) and one ``LabelShard`` for the
server. Everything is indexed by the same sample ids, so a shared batch order aligns parties.

Two kinds of task: classification (``metric`` accuracy or auprc; int64 labels in ``[0, num_classes)``,
``num_classes >= 2``) and regression (``metric`` rmse; finite float32 targets, ``num_classes == 1``:
one output). Tabular features may hold NaN for a missing value (``Dataset.num_missing``); only a
strategy that declares ``supports_missing`` trains on them (``vfl/engine/data_support.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from vfl.core.errors import DataError
from vfl.data.scaling import standardize

Modality = Literal["tabular", "image", "multiview", "text"]
Metric = Literal["accuracy", "auprc", "rmse"]
REGRESSION_METRICS: tuple[Metric, ...] = ("rmse",)
"""Metrics of a regression task: float targets, ``num_classes == 1``."""


def validate_labels(where: str, y: np.ndarray, *, num_classes: int, metric: Metric, split: str) -> None:
    """One split's labels fit the task: regression = finite numbers and ``num_classes == 1``;
    classification = integer class ids in ``[0, num_classes)`` and ``num_classes >= 2``."""
    y = np.asarray(y)
    if metric in REGRESSION_METRICS:
        if num_classes != 1:
            raise DataError(f"{where}: a regression task (metric {metric}) has num_classes 1 (one output), "
                            f"got {num_classes}")
        if y.size and y.dtype.kind != "f":
            raise DataError(f"{where}: {split} targets of dtype {y.dtype}; a regression task needs float targets")
        if y.size and not np.isfinite(y).all():
            raise DataError(f"{where}: {split} targets hold {int((~np.isfinite(y)).sum())} NaN or infinite "
                            "values; allowed: finite numbers")
        return
    if num_classes < 2:
        raise DataError(f"{where}: needs at least 2 classes, got {num_classes}")
    if y.size and y.dtype.kind not in "iu":
        raise DataError(f"{where}: {split} labels of dtype {y.dtype}; a classification task (metric {metric}) "
                        "needs integer class ids (a regression task says metric rmse)")
    if y.size and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        raise DataError(f"{where}: {split} outside [0, num_classes={num_classes}) (got {int(y.min())}.."
                        f"{int(y.max())})")


@dataclass(frozen=True)
class Dataset:
    """Full train/test arrays of one dataset, before vertical partitioning.

    ``x_*`` layouts by modality: tabular ``(N, F)`` float32; image ``(N, C, H, W)`` float32;
    multiview ``(N, V, C, H, W)`` float32; text: 1-D object array of ``str``.
    ``y_*`` are int64 class ids in ``[0, num_classes)``, or with ``metric="rmse"`` (regression)
    float32 targets and ``num_classes == 1``. Tabular features may hold NaN (a missing value).
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
        validate_labels(self.name, self.y_train, num_classes=self.num_classes, metric=self.metric, split="y_train")
        validate_labels(self.name, self.y_test, num_classes=self.num_classes, metric=self.metric, split="y_test")

    @property
    def is_regression(self) -> bool:
        """A regression task (float targets, one output) rather than classification."""
        return self.metric in REGRESSION_METRICS

    @cached_property
    def num_missing(self) -> int:
        """Missing feature values (NaN cells) of a tabular dataset, both splits (counted once per object);
        0 for the other modalities, whose loaders hold no missing value (images, views, text)."""
        if self.modality != "tabular":
            return 0
        return int(np.isnan(self.x_train).sum()) + int(np.isnan(self.x_test).sum())

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

    def __post_init__(self) -> None:
        validate_labels("labels", self.y_train, num_classes=self.num_classes, metric=self.metric, split="y_train")
        validate_labels("labels", self.y_test, num_classes=self.num_classes, metric=self.metric, split="y_test")

    @property
    def is_regression(self) -> bool:
        return self.metric in REGRESSION_METRICS


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

    def rows(self, train_ids: list[str], test_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The rows of ``train_ids`` and ``test_ids`` in that order (PSI's broadcast order), z-scored by the
        training rows where the file asks for it (a missing cell stays missing): what a node binds."""
        x_tr = self.x[_positions(self.ids, train_ids, self.source)]
        x_te = self.x[_positions(self.ids, test_ids, self.source)]
        return standardize(x_tr, x_te) if self.standardize else (x_tr, x_te)


def _positions(ids: np.ndarray, wanted: list[str], source: str) -> np.ndarray:
    row = {str(k): i for i, k in enumerate(ids)}
    if any(k not in row for k in wanted):
        raise DataError(f"PSI: the split names sample IDs that {source} does not hold (was the file changed?)")
    return np.asarray([row[k] for k in wanted], dtype=np.int64)


@dataclass(frozen=True)
class KeyedLabels:
    """The label holder's table: sample IDs, class ids (or regression targets), and the train/test split
    if the file gives one."""

    source: str
    ids: np.ndarray  # (n,) object array of str, unique
    y: np.ndarray  # (n,) int64 in [0, num_classes); regression (metric rmse): float32, num_classes 1
    num_classes: int
    is_test: np.ndarray | None = None  # (n,) bool from the file's split column; None = the label holder draws a label-blind uniform split (vfl.data.psi)
    test_fraction: float = 0.25
    class_names: tuple[str, ...] = ()
    metric: Metric = "accuracy"

    @property
    def is_regression(self) -> bool:
        return self.metric in REGRESSION_METRICS

    def shard(self, train_ids: list[str], test_ids: list[str]) -> LabelShard:
        """The labels of ``train_ids`` and ``test_ids`` in that order (PSI's broadcast order)."""
        return LabelShard(self.y[_positions(self.ids, train_ids, self.source)],
                          self.y[_positions(self.ids, test_ids, self.source)], self.num_classes, self.metric)


@runtime_checkable
class KeyedDataSource(Protocol):
    """Per-party files: each host reads only the tables of the nodes it runs; rows are aligned by
    private set intersection in the setup phase (nobody, the driver included, loads the others)."""

    num_parties: int

    @property
    def is_regression(self) -> bool:
        """Does the label file hold regression targets (``data.labels.task: regression``)? Known from
        the config, so the driver asks without opening a file."""
        ...

    def party_table(self, index: int, *, allow_missing: bool = False) -> KeyedTable:
        """Passive party ``index``'s own table; an empty or NaN feature cell is refused unless
        ``allow_missing`` (a strategy that ``supports_missing``), then it is kept as NaN."""
        ...

    def label_table(self) -> KeyedLabels:
        """The label holder's table."""
        ...
