"""UCI Bank Marketing (Moro et al., 2014): ``bank-full.csv`` (45,211 rows) or the ``bank.csv`` sample
(4,521 rows), ``;``-separated with quoted strings; 16 features, label ``y`` (subscribed a term deposit:
no/yes -> 0/1); seeded stratified 75/25 split, metric AUPRC.

The 9 categorical columns become integer codes: the index of the value in its column's category
names sorted alphabetically (``CATEGORIES``, the names bank-names.txt documents; month is ``apr``
= 0 ... ``sep`` = 11, yes/no columns ``no`` = 0, ``yes`` = 1). ``unknown`` is a category, not a
missing value, and ``pdays`` = -1 (not contacted before) stays -1: the file has no missing values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulations.data.registry import DATASETS
from simulations.data.tabular_files import (
    both_classes,
    categories,
    expect_header,
    find_file,
    numbers,
    read_rows,
    split_dataset,
    to_table,
)
from vfl.data.dataset import Dataset

URL = "https://archive.ics.uci.edu/dataset/222/bank+marketing (bank.zip inside: bank-full.csv, bank.csv)"
FILES = ("bank-full.csv",)
COLUMNS = ("age", "job", "marital", "education", "default", "balance", "housing", "loan", "contact", "day", "month",
           "duration", "campaign", "pdays", "previous", "poutcome")
LABEL = "y"
YES_NO = ("no", "yes")
CATEGORIES: dict[str, tuple[str, ...]] = {  # codes = positions in sorted(names)
    "job": ("admin.", "blue-collar", "entrepreneur", "housemaid", "management", "retired", "self-employed", "services",
            "student", "technician", "unemployed", "unknown"),
    "marital": ("divorced", "married", "single"),
    "education": ("primary", "secondary", "tertiary", "unknown"),
    "default": YES_NO, "housing": YES_NO, "loan": YES_NO,
    "contact": ("cellular", "telephone", "unknown"),
    "month": ("apr", "aug", "dec", "feb", "jan", "jul", "jun", "mar", "may", "nov", "oct", "sep"),
    "poutcome": ("failure", "other", "success", "unknown"),
}


@DATASETS.register("bank-marketing")
def load_bank_marketing(*, data_dir: Path | None, seed: int = 0, file: str | None = None,
                        standardize: bool = True) -> Dataset:
    """UCI bank marketing bank-full.csv (45211, 16) or bank.csv: categoricals as sorted-name codes, 2 classes.

    ``file: bank.csv`` reads the 4,521-row sample; metric AUPRC."""
    name = "bank-marketing"
    path = find_file(name, data_dir, FILES, subdirs=("bank-marketing", "bank"), url=URL, file=file)
    table = to_table(name, path, read_rows(name, path, delimiter=";"))
    expect_header(table, (*COLUMNS, LABEL), what="UCI bank marketing's bank-full.csv / bank.csv (';'-separated)")
    numeric = [c for c in COLUMNS if c not in CATEGORIES]
    values = dict(zip(numeric, numbers(table, numeric).T, strict=True))
    values.update({c: categories(table, c, CATEGORIES[c]).astype(np.float64) for c in CATEGORIES})
    x = np.stack([values[c] for c in COLUMNS], axis=1)
    y = categories(table, LABEL, YES_NO)
    both_classes(name, path, y, YES_NO, column=LABEL)
    return split_dataset(name, x, y, seed=seed, scale=standardize, metric="auprc", classes=YES_NO)
