"""Tiny synthetic twins of the tree benchmarks' tables, written IN EACH REAL FORMAT (part of
``simulations.data.fixtures``): default-credit (Kaggle's ``UCI_Credit_Card.csv`` and a CSV export of
the UCI ``.xls`` with its two header rows), give-me-some-credit (``cs-training.csv`` with ``NA``),
bank-marketing (``bank-full.csv`` and ``bank.csv``, ``;``-separated, quoted) and a9a (LIBSVM
``a9a`` / ``a9a.t``; ``a9a.t`` never lists feature 123, as in some copies). Labels depend on the
features, so a model can learn them.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

# Sizes of the tiny sets; the loaders' tests assert these.
CREDIT_ROWS = 120
GMSC_ROWS = 160
BANK_ROWS, BANK_SAMPLE_ROWS = 120, 60
A9A_SIZES = (96, 48)
A9A_ACTIVE = 14  # listed features per line (a9a's rows list 14 or fewer)


def credit_table(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, 23) integer features of the credit-card-clients layout and 0/1 labels (default ~ PAY_0)."""
    pay = rng.integers(-2, 9, size=(n, 6))
    bills = rng.integers(-2000, 200_000, size=(n, 6))
    paid = rng.integers(0, 20_000, size=(n, 6))
    head = np.stack([rng.integers(1, 51, n) * 10_000, rng.integers(1, 3, n), rng.integers(0, 7, n),
                     rng.integers(0, 4, n), rng.integers(21, 76, n)], axis=1)
    y = ((pay[:, 0] >= 2) ^ (rng.random(n) < 0.1)).astype(np.int64)
    y[:2] = (0, 1)  # both classes, whatever the draw
    return np.concatenate([head, pay, bills, paid], axis=1), y


def write_default_credit(out: Path, rng: np.random.Generator, n: int = CREDIT_ROWS) -> None:
    """``default-credit/UCI_Credit_Card.csv`` (Kaggle: amounts as ``20000.0``) and
    ``default-credit/default of credit card clients.csv`` (the .xls saved as CSV: X1..X23/Y row first)."""
    from simulations.data.credit import CREDIT_FEATURES

    x, y = credit_table(rng, n)
    d = out / "default-credit"
    d.mkdir(parents=True, exist_ok=True)
    money = {0, *range(11, 23)}  # LIMIT_BAL, BILL_AMT*, PAY_AMT*: floats in Kaggle's file
    with open(d / "UCI_Credit_Card.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ID", *CREDIT_FEATURES, "default.payment.next.month"])
        for i, (row, label) in enumerate(zip(x, y, strict=True)):
            w.writerow([i + 1, *(f"{v}.0" if j in money else str(v) for j, v in enumerate(row)), label])
    with open(d / "default of credit card clients.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["", *(f"X{i}" for i in range(1, 24)), "Y"])
        w.writerow(["ID", *CREDIT_FEATURES, "default payment next month"])
        w.writerows([i + 1, *row, label] for i, (row, label) in enumerate(zip(x, y, strict=True)))


def write_give_me_some_credit(out: Path, rng: np.random.Generator, n: int = GMSC_ROWS) -> None:
    """``give-me-some-credit/cs-training.csv``: unnamed index column, label second, ``NA`` in
    MonthlyIncome (every 5th row) and NumberOfDependents (every 16th)."""
    from simulations.data.credit import GMSC_FEATURES, GMSC_LABEL

    late = rng.integers(0, 4, size=n)
    y = ((late >= 2) ^ (rng.random(n) < 0.05)).astype(np.int64)
    y[:2] = (0, 1)
    d = out / "give-me-some-credit"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "cs-training.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["", GMSC_LABEL, *GMSC_FEATURES])
        for i in range(n):
            income = "NA" if i % 5 == 4 else str(int(rng.integers(0, 20_000)))
            deps = "NA" if i % 16 == 15 else str(int(rng.integers(0, 5)))
            w.writerow([i + 1, y[i], f"{rng.random() * 1.2:.9g}", int(rng.integers(21, 90)), late[i],
                        f"{rng.random() * 3:.9g}", income, int(rng.integers(0, 20)), int(late[i] > 2),
                        int(rng.integers(0, 4)), int(rng.integers(0, 2)), deps])


def write_bank(out: Path, rng: np.random.Generator) -> None:
    """``bank-marketing/bank-full.csv`` and ``bank-marketing/bank.csv``: ``;``-separated, strings quoted,
    numbers bare; the label ``y`` follows the call duration."""
    from simulations.data.bank import CATEGORIES, COLUMNS, LABEL

    d = out / "bank-marketing"
    d.mkdir(parents=True, exist_ok=True)
    for name, n in (("bank-full.csv", BANK_ROWS), ("bank.csv", BANK_SAMPLE_ROWS)):
        with open(d / name, "w", newline="") as f:
            w = csv.writer(f, delimiter=";", quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
            w.writerow([*COLUMNS, LABEL])
            for i in range(n):
                duration = int(rng.integers(0, 1000))
                yes = (duration > 600) ^ (rng.random() < 0.05) if i > 1 else bool(i)
                num = {"age": int(rng.integers(18, 95)), "balance": int(rng.integers(-2000, 50_000)),
                       "day": int(rng.integers(1, 32)), "duration": duration, "campaign": int(rng.integers(1, 10)),
                       "pdays": -1 if i % 3 else int(rng.integers(1, 400)), "previous": int(rng.integers(0, 5))}
                cat = {c: CATEGORIES[c][(i + k) % len(CATEGORIES[c])] for k, c in enumerate(CATEGORIES)}
                w.writerow([num[c] if c in num else cat[c] for c in COLUMNS] + [("no", "yes")[int(yes)]])


def write_a9a(out: Path, rng: np.random.Generator) -> None:
    """``a9a/a9a`` and ``a9a/a9a.t``: ``-1 3:1 11:1 ...`` lines (trailing space, as LIBSVM's files)."""
    from simulations.data.libsvm import NUM_FEATURES

    d = out / "a9a"
    d.mkdir(parents=True, exist_ok=True)
    for name, n, top in (("a9a", A9A_SIZES[0], NUM_FEATURES), ("a9a.t", A9A_SIZES[1], NUM_FEATURES - 1)):
        lines = []
        for i in range(n):
            label = i % 2
            pool = np.arange(1, top + 1)
            weights = np.where((pool > 40) == bool(label), 3.0, 1.0)  # class 1 leans on the higher indices
            idx = np.sort(rng.choice(pool, size=A9A_ACTIVE, replace=False, p=weights / weights.sum()))
            if name == "a9a" and i == 0:
                idx[-1] = NUM_FEATURES  # the training file uses all 123 columns
            lines.append(("+1" if label else "-1") + " " + " ".join(f"{j}:1" for j in idx) + " ")
        (d / name).write_text("\n".join(lines) + "\n")


def write_tabular(out: Path, rng: np.random.Generator) -> None:
    """Every tree-benchmark table above, under ``out``."""
    write_default_credit(out, rng)
    write_give_me_some_credit(out, rng)
    write_bank(out, rng)
    write_a9a(out, rng)
