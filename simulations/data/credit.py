"""Credit scoring tables of the gradient-boosted-tree VFL benchmarks: ``default-credit`` and
``give-me-some-credit`` (binary labels, seeded stratified 75/25 split, metric AUPRC).

``default-credit``: UCI "default of credit card clients" (30,000 x 23, Taiwan 2005), read as the UCI
``.xls`` (two header rows: ``X1..X23, Y`` then the names; needs the ``xls`` extra, xlrd), a CSV export
of it (the same two header rows, or only the names row), or Kaggle's ``UCI_Credit_Card.csv``. The
``ID`` column is dropped; SEX, EDUCATION, MARRIAGE and the PAY_* statuses are the file's integer codes.

``give-me-some-credit``: Kaggle's ``cs-training.csv`` (150,000 x 10; an unnamed index column, label
``SeriousDlqin2yrs``); ``NA`` (or an empty cell) in MonthlyIncome and NumberOfDependents is a missing
value, kept as NaN.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulations.data.registry import DATASETS
from simulations.data.tabular_files import (
    Table,
    both_classes,
    expect_header,
    find_file,
    numbers,
    read_rows,
    split_dataset,
    to_table,
)
from vfl.core.errors import DataError, install_hint
from vfl.data.dataset import Dataset

CREDIT_URL = ("https://archive.ics.uci.edu/dataset/350/default+of+credit+card+clients (the .xls) or "
              "https://www.kaggle.com/datasets/uciml/default-of-credit-card-clients-dataset (UCI_Credit_Card.csv)")
CREDIT_FILES = ("default of credit card clients.xls", "default_of_credit_card_clients.xls", "UCI_Credit_Card.csv",
                "default of credit card clients.csv", "default_of_credit_card_clients.csv")
CREDIT_FEATURES = ("LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE", "PAY_0", "PAY_2", "PAY_3", "PAY_4", "PAY_5",
                   "PAY_6", *(f"BILL_AMT{i}" for i in range(1, 7)), *(f"PAY_AMT{i}" for i in range(1, 7)))
CREDIT_LABELS = ("default payment next month", "default.payment.next.month")  # UCI's name, Kaggle's

GMSC_URL = "https://www.kaggle.com/c/GiveMeSomeCredit/data"
GMSC_FILES = ("cs-training.csv",)
GMSC_LABEL = "SeriousDlqin2yrs"
GMSC_FEATURES = ("RevolvingUtilizationOfUnsecuredLines", "age", "NumberOfTime30-59DaysPastDueNotWorse", "DebtRatio",
                 "MonthlyIncome", "NumberOfOpenCreditLinesAndLoans", "NumberOfTimes90DaysLate",
                 "NumberRealEstateLoansOrLines", "NumberOfTime60-89DaysPastDueNotWorse", "NumberOfDependents")
GMSC_INDEX = ("", "Unnamed: 0", "ID", "Id", "id")  # the index column's header as Kaggle's and pandas' files write it
GMSC_NA = ("NA", "")


def _binary(table: Table, column: str) -> np.ndarray:
    """A 0/1 label column (``1`` or ``1.0``) as int64."""
    raw = numbers(table, [column])[:, 0]
    bad = np.flatnonzero((raw != 0) & (raw != 1))
    if len(bad):
        raise DataError(f"{table.name}: {table.path} line {table.lines[bad[0]]} label {column!r} is "
                        f"{raw[bad[0]]:g}; allowed: 0, 1")
    return raw.astype(np.int64)


def read_xls(name: str, path: Path) -> list[tuple[int, list[str]]]:
    """The first sheet of a legacy Excel ``.xls`` as text rows (numbers as ``repr(float)``, exact)."""
    try:
        import xlrd
    except ImportError:
        raise DataError(f"{name}: {path} is an Excel .xls file; reading it needs the optional 'xls' extra (xlrd): "
                        f"{install_hint('xls')} (or save the sheet as CSV)") from None
    try:
        book = xlrd.open_workbook(str(path), on_demand=True)
        sheet = book.sheet_by_index(0)
        rows = [(r + 1, [repr(v) if isinstance(v, float) else str(v).strip() for v in sheet.row_values(r)])
                for r in range(sheet.nrows)]
    except Exception as exc:  # xlrd's XLRDError, struct errors of a damaged file
        raise DataError(f"{name}: cannot read {path} as an Excel .xls sheet: {type(exc).__name__}: {exc}") from None
    return [(n, row) for n, row in rows if any(row)]


@DATASETS.register("default-credit")
def load_default_credit(*, data_dir: Path | None, seed: int = 0, file: str | None = None,
                        standardize: bool = True) -> Dataset:
    """UCI default of credit card clients: (30000, 23) float32, 2 classes (default next month), AUPRC."""
    name = "default-credit"
    path = find_file(name, data_dir, CREDIT_FILES, subdirs=("default-credit",), url=CREDIT_URL, file=file)
    rows = read_xls(name, path) if path.suffix.lower() == ".xls" else read_rows(name, path)
    codes = bool(rows) and rows[0][1][1:2] == ["X1"]  # the .xls's (and its CSV export's) X1..X23, Y row first
    table = to_table(name, path, rows, header_at=1 if codes else 0)
    label = table.header[-1] if table.header[-1] in CREDIT_LABELS else CREDIT_LABELS[0]
    expect_header(table, ("ID", *CREDIT_FEATURES, label), what="the credit-card-clients table")
    x, y = numbers(table, CREDIT_FEATURES), _binary(table, label)
    classes = ("no-default", "default")
    both_classes(name, path, y, classes, column=label)
    return split_dataset(name, x, y, seed=seed, scale=standardize, metric="auprc", classes=classes)


@DATASETS.register("give-me-some-credit")
def load_give_me_some_credit(*, data_dir: Path | None, seed: int = 0, file: str | None = None,
                             standardize: bool = True) -> Dataset:
    """Kaggle Give Me Some Credit cs-training.csv: (150000, 10) float32 with NaN for NA, 2 classes, AUPRC."""
    name = "give-me-some-credit"
    path = find_file(name, data_dir, GMSC_FILES, subdirs=("give-me-some-credit", "GiveMeSomeCredit"),
                     url=GMSC_URL, file=file)
    table = to_table(name, path, read_rows(name, path))
    index = table.header[0] if table.header and table.header[0] in GMSC_INDEX else ""
    expect_header(table, (index, GMSC_LABEL, *GMSC_FEATURES), what="Kaggle's cs-training.csv")
    x, y = numbers(table, GMSC_FEATURES, na=GMSC_NA), _binary(table, GMSC_LABEL)
    classes = ("no-delinquency", "delinquency")
    both_classes(name, path, y, classes, column=GMSC_LABEL)
    return split_dataset(name, x, y, seed=seed, scale=standardize, metric="auprc", classes=classes)
