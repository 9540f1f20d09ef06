"""UCI HAR (Human Activity Recognition Using Smartphones): 561 features, 6 activities.

Reads the public zip's layout: ``<data_dir>/UCI HAR Dataset/{train,test}/{X,y}_{train,test}.txt``
(whitespace-separated floats, labels 1..6 -> 0..5). 7352 train / 2947 test samples.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Literal

import numpy as np

from simulations.data.common import missing, require_dir
from simulations.data.registry import DATASETS
from vfl.core.errors import DataError
from vfl.data.dataset import Dataset

URL = "https://archive.ics.uci.edu/dataset/240/human+activity+recognition+using+smartphones"
ROOT = "UCI HAR Dataset"
FILES = tuple(f"{ROOT}/{s}/{k}_{s}.txt" for s in ("train", "test") for k in ("X", "y"))
ACTIVITIES = ("walking", "walking_upstairs", "walking_downstairs", "sitting", "standing", "laying")
NUM_FEATURES = 561


def _load(path: Path, dtype: type[np.generic], ndmin: Literal[1, 2]) -> np.ndarray:
    """``np.loadtxt`` whose failures (non-numeric value, ragged row, unreadable file) name the file."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": checked below
            return np.loadtxt(path, dtype=dtype, ndmin=ndmin)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise DataError(f"har: {path}: {' '.join(str(exc).split())}") from None


def _read_split(root: Path, split: str, data_dir: Path | None) -> tuple[np.ndarray, np.ndarray]:
    xf, yf = root / split / f"X_{split}.txt", root / split / f"y_{split}.txt"
    if not (xf.is_file() and yf.is_file()):
        raise missing("har", expected=FILES, url=URL, data_dir=data_dir)
    x, y = _load(xf, np.float32, 2), _load(yf, np.int64, 1)
    if x.size == 0:
        raise DataError(f"har: {xf} holds no rows")
    if not np.isfinite(x).all():
        row = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0]) + 1
        raise DataError(f"har: {xf} row {row} holds a NaN or infinite value")
    if x.shape[1] != NUM_FEATURES:
        raise DataError(f"har: {xf} has {x.shape[1]} columns, expected {NUM_FEATURES}")
    if len(x) != len(y):
        raise DataError(f"har: {xf} has {len(x)} rows but {yf} has {len(y)} labels")
    if y.size and (y.min() < 1 or y.max() > len(ACTIVITIES)):
        raise DataError(f"har: labels in {yf} must lie in 1..{len(ACTIVITIES)}, got {y.min()}..{y.max()}")
    return x, y - 1


@DATASETS.register("har")
def load_har(*, data_dir: Path | None, seed: int = 0) -> Dataset:
    """UCI HAR: (N, 561) float32 features, 6 classes, the public train/test split."""
    root = require_dir("har", data_dir, [ROOT], expected=FILES, url=URL)
    x_tr, y_tr = _read_split(root, "train", data_dir)
    x_te, y_te = _read_split(root, "test", data_dir)
    return Dataset("har", x_tr, y_tr, x_te, y_te, len(ACTIVITIES), "tabular", "accuracy", ACTIVITIES)
