"""Reading the public delimited tabular files (CSV, ``;``-separated) the tree benchmarks use.

Shared by ``credit.py`` and ``bank.py``: find the file under ``data_dir``, read its rows with the
``csv`` module (quoted fields, ``.gz`` transparently), check the header, the row lengths, the
numbers and the categories, and split into a ``Dataset``. Every failure is one ``DataError`` naming
the dataset, the file and the line (1-based, as an editor shows it); the files are public data
sets, so a bad cell's value is quoted. A missing value is NaN only where the format has a marker for
it (``na``); anywhere else an empty or non-numeric cell is an error.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulations.data.common import missing, standardize, stratified_split
from vfl.core.errors import DataError
from vfl.data.dataset import Dataset, Metric

TEST_FRACTION = 0.25


def find_file(name: str, data_dir: Path | None, names: Sequence[str], *, subdirs: Sequence[str], url: str,
              file: str | None = None) -> Path:
    """The first of ``names`` (or just ``file``) under ``data_dir/<subdir>`` or ``data_dir``; else the
    one-line missing-data error listing every name it looked for."""
    wanted = (file,) if file else tuple(names)
    dirs = [data_dir / s for s in subdirs] + [data_dir] if data_dir is not None else []
    for n in wanted:
        for d in dirs:
            if (d / n).is_file():
                return d / n
    where = f"looked in {', '.join(str(d) for d in dirs)}" if dirs else ""
    other = "" if file else "data.load_opts.file names another file"
    hint = "; ".join(h for h in (where, other) if h)
    raise missing(name, expected=wanted, url=url, data_dir=data_dir, hint=f"({hint})" if hint else "")


@dataclass(frozen=True)
class Table:
    """A delimited file's header and data cells as text, with each row's line in the file."""

    name: str  # the dataset (for messages)
    path: Path
    header: list[str]
    cells: np.ndarray  # (rows, columns) str
    lines: list[int]

    def column(self, col: str) -> int:
        return self.header.index(col)


def read_rows(name: str, path: Path, *, delimiter: str = ",") -> list[tuple[int, list[str]]]:
    """Every non-blank row of a delimited file with its line number."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as f:  # type: ignore[operator]
            reader = csv.reader(f, delimiter=delimiter)
            return [(reader.line_num, row) for row in reader if row and (len(row) > 1 or row[0].strip())]
    except (OSError, UnicodeDecodeError, csv.Error, EOFError) as exc:
        raise DataError(f"{name}: cannot read {path} as a delimited text file: {exc}") from None


def to_table(name: str, path: Path, rows: list[tuple[int, list[str]]], *, header_at: int = 0) -> Table:
    """Header = row ``header_at``; the rows after it must have as many cells (a ragged row is refused)."""
    if len(rows) <= header_at:
        raise DataError(f"{name}: {path} is empty (expected a header and data rows)")
    header = [h.strip() for h in rows[header_at][1]]
    data = rows[header_at + 1:]
    if not data:
        raise DataError(f"{name}: {path} has a header but no data rows")
    for line, row in data:
        if len(row) != len(header):
            raise DataError(f"{name}: {path} line {line} has {len(row)} values, the header has {len(header)}")
    cells = np.char.strip(np.asarray([r for _, r in data], dtype=str).reshape(len(data), len(header)))
    return Table(name, path, header, cells, [n for n, _ in data])


def expect_header(table: Table, expected: Sequence[str], *, what: str) -> None:
    """The header must be ``expected`` exactly (names, order and count); the first difference is named."""
    got = table.header
    for i, (g, e) in enumerate(zip(got, expected, strict=False)):
        if g != e:
            raise DataError(f"{table.name}: {table.path} header column {i + 1} is {g[:40]!r}, expected {e!r} "
                            f"(not {what}?)")
    if len(got) != len(expected):
        raise DataError(f"{table.name}: {table.path} header has {len(got)} columns, expected {len(expected)} "
                        f"(not {what}?)")


def numbers(table: Table, columns: Sequence[str], *, na: Collection[str] = ()) -> np.ndarray:
    """``columns`` as float64 ``(n, len(columns))``; a cell in ``na`` becomes NaN (a missing value), any
    other cell must be a finite number."""
    cells = table.cells[:, [table.column(c) for c in columns]]
    absent = np.isin(cells, list(na)) if na else np.zeros(cells.shape, dtype=bool)
    filled = np.where(absent, "nan", cells)
    try:
        out = filled.astype(np.float64)
        bad = ~np.isfinite(out) & ~absent
    except ValueError:  # some cell is not a number: find the first one below
        out, bad = np.zeros(cells.shape), np.ones(cells.shape, dtype=bool)
    for r, c in zip(*np.nonzero(bad), strict=True):
        try:
            ok = bool(np.isfinite(float(filled[r, c])))
        except ValueError:
            ok = False
        if not ok:
            allowed = "a finite number" + (f" or {' / '.join(map(repr, sorted(na)))} (missing)" if na else "")
            raise DataError(f"{table.name}: {table.path} line {table.lines[r]} column {columns[c]!r} holds "
                            f"{str(cells[r, c])[:24]!r}; allowed: {allowed}")
    return out


def categories(table: Table, column: str, allowed: Sequence[str]) -> np.ndarray:
    """A categorical column as int64 codes: the index of each value in ``sorted(allowed)``."""
    names = np.asarray(sorted(allowed), dtype=str)
    values = table.cells[:, table.column(column)]
    codes = np.searchsorted(names, values).clip(0, len(names) - 1)
    bad = np.flatnonzero(names[codes] != values)
    if len(bad):
        raise DataError(f"{table.name}: {table.path} line {table.lines[bad[0]]} column {column!r} holds "
                        f"{str(values[bad[0]])[:24]!r}; allowed: {', '.join(names)}")
    return codes.astype(np.int64)


def both_classes(name: str, path: Path, y: np.ndarray, classes: Sequence[str], *, column: str) -> None:
    """A classifier needs every class of a binary label at least once (twice: one per split)."""
    counts = np.bincount(y, minlength=len(classes))
    if (counts < 2).any():
        lone = [c for c, k in zip(classes, counts, strict=True) if k < 2]
        raise DataError(f"{name}: label column {column!r} of {path} holds class {lone[0]!r} {int(counts.min())} "
                        f"time(s); a classifier needs every class at least twice (one train and one test row)")


def split_dataset(name: str, x: np.ndarray, y: np.ndarray, *, seed: int, scale: bool, metric: Metric,
                  classes: tuple[str, ...]) -> Dataset:
    """Seeded stratified 75/25 split, features z-scored with train statistics when ``scale`` (NaN kept)."""
    tr, te = stratified_split(y, test_fraction=TEST_FRACTION, seed=seed, salt=name)
    x_tr, x_te = x[tr], x[te]
    x_tr, x_te = standardize(x_tr, x_te) if scale else (x_tr.astype(np.float32), x_te.astype(np.float32))
    return Dataset(name, x_tr, y[tr], x_te, y[te], len(classes), "tabular", metric, classes)
