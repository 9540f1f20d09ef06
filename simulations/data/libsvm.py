"""LIBSVM's ``a9a`` (UCI Adult, binarized: 123 binary features): the files ``a9a`` (32,561 rows) and
``a9a.t`` (16,281 rows), the files' own train/test split.

LIBSVM sparse text: ``<label> <index>:<value> ...`` per line, labels -1/+1 (-> 0/1), 1-based
ascending indices. Read dense as float32 ``(n, 123)``: an index a line does not list is 0, an absent
entry of a sparse format, not a missing value (``a9a.t`` never lists feature 123 in some copies: it
is padded). Metric accuracy (LIBSVM's own); not z-scored by default (binary features).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulations.data.common import missing
from simulations.data.registry import DATASETS
from vfl.core.errors import DataError
from vfl.data.dataset import Dataset
from vfl.data.scaling import standardize as zscore

URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a"
NUM_FEATURES = 123
LABELS = {"-1": 0, "+1": 1, "1": 1, "0": 0}  # the files write -1/+1; some copies 0/1
CLASSES = ("<=50K", ">50K")


def read_libsvm(name: str, path: Path, *, num_features: int) -> tuple[np.ndarray, np.ndarray]:
    """A LIBSVM file as dense float32 ``(n, num_features)`` (unlisted = 0) and int64 0/1 labels."""
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    y: list[int] = []
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                tokens = line.split("#", 1)[0].split()
                if not tokens:
                    continue
                label = LABELS.get(tokens[0])
                if label is None:
                    raise DataError(f"{name}: {path} line {lineno} starts with {tokens[0][:24]!r}; allowed labels: "
                                    "-1, +1 (LIBSVM binary format)")
                last = 0
                for tok in tokens[1:]:
                    idx, sep, val = tok.partition(":")
                    try:
                        i, v = int(idx), float(val)
                    except ValueError:
                        i, v = -1, 0.0
                    if not sep or i < 1 or not np.isfinite(v):
                        raise DataError(f"{name}: {path} line {lineno} holds {tok[:24]!r}; allowed: index:value with "
                                        "a 1-based index and a finite number")
                    if i <= last:
                        raise DataError(f"{name}: {path} line {lineno}: index {i} after {last}; LIBSVM indices "
                                        "ascend, each once")
                    if i > num_features:
                        raise DataError(f"{name}: {path} line {lineno}: index {i}; allowed: 1..{num_features}")
                    last = i
                    rows.append(len(y))
                    cols.append(i - 1)
                    vals.append(v)
                y.append(label)
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{name}: cannot read {path}: {exc}") from None
    if not y:
        raise DataError(f"{name}: {path} holds no data lines")
    x = np.zeros((len(y), num_features), dtype=np.float32)
    x[np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)] = np.asarray(vals, dtype=np.float32)
    return x, np.asarray(y, dtype=np.int64)


def _find(data_dir: Path | None, file: str) -> Path:
    for p in ((data_dir / "a9a" / file, data_dir / file) if data_dir is not None else ()):
        if p.is_file():
            return p
    raise missing("a9a", expected=("a9a", "a9a.t"), url=URL, data_dir=data_dir,
                  hint="(both files, in the data directory or its a9a/ folder)")


@DATASETS.register("a9a")
def load_a9a(*, data_dir: Path | None, seed: int = 0, standardize: bool = False) -> Dataset:
    """LIBSVM a9a (Adult): (32561 + 16281, 123) float32 binary features, 2 classes, the files' own split."""
    train, test = _find(data_dir, "a9a"), _find(data_dir, "a9a.t")
    x_tr, y_tr = read_libsvm("a9a", train, num_features=NUM_FEATURES)
    x_te, y_te = read_libsvm("a9a", test, num_features=NUM_FEATURES)
    if len(np.unique(y_tr)) < 2:
        raise DataError(f"a9a: {train} holds class {CLASSES[int(y_tr[0])]!r} only; a classifier needs both")
    if standardize:
        x_tr, x_te = zscore(x_tr, x_te)
    return Dataset("a9a", x_tr, y_tr, x_te, y_te, 2, "tabular", "accuracy", CLASSES)
