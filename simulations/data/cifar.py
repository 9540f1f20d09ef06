"""CIFAR-10 from the public "python version" batches (``cifar-10-batches-py``).

Images come back as ``(N, 3, 32, 32)`` float32 in [0, 1] (no per-channel normalization: the
bottoms learn their own scale); 50000 train / 10000 test, 10 classes.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from simulations.data.common import missing, require_dir
from simulations.data.registry import DATASETS
from vfl.core.errors import DataError
from vfl.data.dataset import Dataset

URL = "https://www.cs.toronto.edu/~kriz/cifar.html"
ROOT = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
FILES = tuple(f"{ROOT}/{b}" for b in (*TRAIN_BATCHES, "test_batch"))
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


class _BatchUnpickler(pickle.Unpickler):
    """Admits only what a CIFAR-10 batch holds: dicts, lists, bytes, ints and uint8 numpy arrays.
    Any other global (``os.system``...) is refused, so a crafted file cannot run code."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"): ("numpy", "ndarray"),
        ("numpy", "dtype"): ("numpy", "dtype"),
        ("_codecs", "encode"): ("_codecs", "encode"),  # bytes pickled by Python 3 at protocol 2
    }

    def find_class(self, module: str, name: str) -> Any:
        target = self.ALLOWED.get((module, name))
        if target is None:
            raise pickle.UnpicklingError(f"refuses global {module}.{name} (not part of a CIFAR-10 batch)")
        return super().find_class(*target)


def _unpickle(path: Path) -> Any:
    # The PUBLIC CIFAR-10 distribution format (Python pickles written by the dataset authors), read
    # with a restricted unpickler; any failure names the file.
    try:
        with open(path, "rb") as f:
            return _BatchUnpickler(f, encoding="bytes").load()
    except OSError as exc:
        raise DataError(f"cifar10: cannot read {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # truncated, garbage, or a refused global
        raise DataError(f"cifar10: {path} is not a readable CIFAR-10 batch "
                        f"({type(exc).__name__}: {exc})") from None


def read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch file -> ``(n, 3, 32, 32)`` uint8 images and int64 labels."""
    d = _unpickle(path)
    if not isinstance(d, dict) or b"data" not in d or b"labels" not in d:
        raise DataError(f"cifar10: {path} is not a CIFAR-10 batch (needs keys b'data' and b'labels')")
    raw = d[b"data"]
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8:
        raise DataError(f"cifar10: {path} b'data' must be a uint8 array, got {type(raw).__name__} "
                        f"{getattr(raw, 'dtype', '')}")
    try:
        labels = np.asarray(d[b"labels"], dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise DataError(f"cifar10: {path} b'labels' must be a list of integers") from None
    if raw.ndim != 2 or raw.shape[1] != 3 * 32 * 32 or labels.ndim != 1 or len(raw) != len(labels):
        raise DataError(f"cifar10: {path} has data {raw.shape} and {labels.shape} labels; expected (n, 3072), (n,)")
    if labels.size and (labels.min() < 0 or labels.max() >= len(CLASSES)):
        raise DataError(f"cifar10: {path} has labels {labels.min()}..{labels.max()}; allowed 0..{len(CLASSES) - 1}")
    return raw.reshape(-1, 3, 32, 32), labels


def to_unit(x: np.ndarray) -> np.ndarray:
    """uint8 pixels -> float32 in [0, 1] (one allocation)."""
    out = x.astype(np.float32)
    out *= 1.0 / 255.0
    return out


@DATASETS.register("cifar10")
def load_cifar10(*, data_dir: Path | None, seed: int = 0) -> Dataset:
    """CIFAR-10: (N, 3, 32, 32) float32 in [0, 1], 10 classes, the public train/test split."""
    root = require_dir("cifar10", data_dir, [ROOT], expected=FILES, url=URL)
    if not all((root / b).is_file() for b in (*TRAIN_BATCHES, "test_batch")):
        raise missing("cifar10", expected=FILES, url=URL, data_dir=data_dir)
    parts = [read_batch(root / b) for b in TRAIN_BATCHES]
    x_tr = to_unit(np.concatenate([p[0] for p in parts]))
    y_tr = np.concatenate([p[1] for p in parts])
    x_te, y_te = read_batch(root / "test_batch")
    x_te = to_unit(x_te)
    return Dataset("cifar10", x_tr, y_tr, x_te, y_te, len(CLASSES), "image", "accuracy", CLASSES)
