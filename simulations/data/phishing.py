"""Phishing websites: the UCI ARFF / OpenML CSV (11055 x 30, values in {-1,0,1}) and river's copy.

UCI/OpenML: class ``Result`` in {-1, +1} -> {0, 1}; seeded stratified 80/20 split; metric AUPRC.
ARFF's missing-value marker ``?`` in a feature is kept as NaN (the public file has none; only a
strategy that handles missing values trains on it); anywhere else a missing or non-numeric value is
refused.
``phishing-river``: river's bundled 1250 x 9 sample (features in [0, 1], ``is_phishing`` 0/1).
"""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import numpy as np

from simulations.data.common import missing, stratified_split
from simulations.data.registry import DATASETS, bundled
from vfl.core.errors import DataError
from vfl.data.dataset import Dataset

URL = "https://archive.ics.uci.edu/dataset/327/phishing+websites or https://www.openml.org/d/4534"
ARFF_NAMES = ("Training Dataset.arff", "PhishingWebsites.arff", "phishing.arff")
CSV_NAMES = ("phishing.csv", "PhishingWebsites.csv")
CLASS_COLUMNS = ("Result", "class", "CLASS_LABEL")
TEST_FRACTION = 0.2
ARFF_MISSING = "?"


def _clean(tok: str) -> str:
    return tok.strip().strip("'\"")


def _domain(spec: str) -> set[str] | None:
    """The value set of a nominal ARFF attribute (``{-1,0,1}``), ``None`` for numeric ones."""
    spec = spec.strip()
    if spec.startswith("{") and spec.endswith("}"):
        return {_clean(v) for v in spec[1:-1].split(",")}
    return None


def read_arff(path: Path) -> tuple[list[str], list[list[str]]]:
    """Attribute names and data rows (as strings) of a dense ARFF file; every value of a nominal
    attribute must be one its declaration allows or ARFF's missing marker ``?`` (else ``DataError``
    naming line and value)."""
    names: list[str] = []
    domains: list[set[str] | None] = []
    rows: list[list[str]] = []
    in_data = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            s = line.strip()
            if not s or s.startswith("%"):
                continue
            low = s.lower()
            if not in_data and low.startswith("@attribute"):
                parts = s.split(None, 2)
                if len(parts) < 3:
                    raise DataError(f"phishing: {path} line {lineno}: malformed @attribute declaration")
                names.append(_clean(parts[1]))
                domains.append(_domain(parts[2]))
            elif not in_data and low.startswith("@data"):
                in_data = True
            elif in_data:
                if s.startswith("{"):
                    raise DataError(f"phishing: {path} is a sparse ARFF; only dense ARFF is supported")
                row = [_clean(t) for t in s.split(",")]
                for name, dom, v in zip(names, domains, row, strict=False):
                    if dom is not None and v not in dom and v != ARFF_MISSING:
                        raise DataError(f"phishing: {path} line {lineno}: {name} = {v!r}; allowed: "
                                        f"{{{','.join(sorted(dom))}}}")
                rows.append(row)
    if not in_data:
        raise DataError(f"phishing: {path} has no @data section (not an ARFF file?)")
    return names, rows


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a CSV file (``.gz`` transparently)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as f:  # type: ignore[operator]
            r = csv.reader(f)
            header = [_clean(h) for h in next(r, [])]
            rows = [[_clean(t) for t in row] for row in r if row]
    except (OSError, UnicodeDecodeError, csv.Error, EOFError) as exc:
        raise DataError(f"phishing: cannot read {path} as CSV: {exc}") from None
    return header, rows


def to_arrays(path: Path, names: list[str], rows: list[list[str]], *,
              missing: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows -> float32 features and the raw numeric class column (``Result``/``class``/last); a feature
    cell equal to ``missing`` (ARFF's ``?``) becomes NaN."""
    if not names:
        raise DataError(f"phishing: {path} is empty (expected a header and data rows)")
    if not rows:
        raise DataError(f"phishing: {path} has a header but no data rows")
    if len(names) < 2:
        raise DataError(f"phishing: {path} has {len(names)} column; expected features and a class column")
    cls = next((names.index(c) for c in CLASS_COLUMNS if c in names), len(names) - 1)
    bad = next((i for i, r in enumerate(rows) if len(r) != len(names)), None)
    if bad is not None:
        raise DataError(f"phishing: {path} row {bad + 1} has {len(rows[bad])} values, header has {len(names)}")
    cells = np.asarray(rows, dtype=str)
    absent = cells == missing if missing is not None else np.zeros(cells.shape, dtype=bool)
    if absent[:, cls].any():
        raise DataError(f"phishing: {path} data row {int(np.flatnonzero(absent[:, cls])[0]) + 1} has no class "
                        f"({missing!r}); allowed: a class value on every row")
    try:
        table = np.where(absent, "nan", cells).astype(np.float64)
    except ValueError as e:
        raise DataError(f"phishing: {path} holds a non-numeric or missing value: {e}") from e
    if not (np.isfinite(table) | absent).all():
        raise DataError(f"phishing: {path} holds a NaN or infinite value")
    return np.delete(table, cls, axis=1).astype(np.float32), table[:, cls]


def _split(name: str, x: np.ndarray, y: np.ndarray, seed: int, classes: tuple[str, ...]) -> Dataset:
    tr, te = stratified_split(y, test_fraction=TEST_FRACTION, seed=seed, salt=name)
    return Dataset(name, x[tr], y[tr], x[te], y[te], 2, "tabular", "auprc", classes)


@DATASETS.register("phishing")
def load_phishing(*, data_dir: Path | None, seed: int = 0, file: str | None = None) -> Dataset:
    """UCI/OpenML phishing websites: (N, 30) float32 in {-1,0,1}, 2 classes, metric AUPRC."""
    names = (file,) if file else (*ARFF_NAMES, *CSV_NAMES)
    expected = tuple(f"phishing/{n}" for n in names)
    path = None
    if data_dir is not None:
        path = next((d / n for n in names for d in (data_dir / "phishing", data_dir) if (d / n).is_file()), None)
    if path is None:
        raise missing("phishing", expected=expected, url=URL, data_dir=data_dir)
    arff = path.suffix.lower() == ".arff"
    header, rows = read_arff(path) if arff else read_csv(path)
    x, raw = to_arrays(path, header, rows, missing=ARFF_MISSING if arff else None)
    if not set(np.unique(raw)) <= {-1.0, 1.0}:
        raise DataError(f"phishing: class values in {path} must be -1/+1, got {sorted(set(np.unique(raw)))[:5]}")
    return _split("phishing", x, (raw > 0).astype(np.int64), seed, ("-1", "+1"))


@DATASETS.register("phishing-river")
@bundled
def load_phishing_river(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """river's bundled phishing sample: (1250, 9) float32 in [0, 1], 2 classes, metric AUPRC."""
    from importlib.resources import files

    res = files("river.datasets").joinpath("phishing.csv.gz")
    with res.open("rb") as fb:
        data = gzip.decompress(fb.read()).decode("utf-8")
    r = csv.reader(io.StringIO(data))
    header = next(r)
    rows = [row for row in r if row]
    x, raw = to_arrays(Path(str(res)), header, rows)  # class column is the last: is_phishing
    return _split("phishing-river", x, raw.astype(np.int64), seed, ("legitimate", "phishing"))
