"""Synthetic tables in the shapes the tree-VFL anchors benchmark on, for ``trees`` and ``trees_frontier``.

Each factory is a dataset by import string (``dataset: "simulations.benchmarks.trees_data:bank_like"``,
``simulations/data/custom.py``): deterministic from the run seed, a seeded stratified 75/25 split.
The real files take their place when ``data.data_dir`` has them (the registered loaders ``bank-marketing``,
``a9a``, ``default-credit``: ``docs/datasets.md``); these only reproduce the shape, the column types and a
label with signal, so the cost and the accuracy gap to XGBoost can be measured without a download.

- ``bank_like``: 45,211 × 16 (UCI bank marketing: 7 numeric, 9 categorical codes), ~12 % positive.
- ``a9a_like``: 32,561 × 123 binary one-hot columns (14 groups, exactly 14 non-zeros a row), ~24 % positive.
- ``credit_like``: 30,000 × 23 (UCI default of credit card clients), ~22 % positive.
"""

from __future__ import annotations

import numpy as np

from vfl.data.dataset import Dataset

TEST_FRACTION = 0.25


def _split(name: str, x: np.ndarray, y: np.ndarray, seed: int) -> Dataset:
    rng = np.random.default_rng([seed, 7])
    test = np.zeros(len(y), dtype=bool)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        test[rng.choice(idx, size=int(round(len(idx) * TEST_FRACTION)), replace=False)] = True
    x = x.astype(np.float32)
    return Dataset(name, x[~test], y[~test].astype(np.int64), x[test], y[test].astype(np.int64), 2)


def _label(rng: np.random.Generator, score: np.ndarray, positive: float) -> np.ndarray:
    """Labels from a logistic of ``score`` with the intercept that gives about ``positive``."""
    z = (score - score.mean()) / (score.std() + 1e-9) * 1.6
    lo, hi = -10.0, 10.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if (1 / (1 + np.exp(-(z + mid)))).mean() > positive:
            hi = mid
        else:
            lo = mid
    return (rng.random(len(z)) < 1 / (1 + np.exp(-(z + lo)))).astype(np.int64)


def bank_like(*, seed: int = 0, rows: int = 45211) -> Dataset:
    rng = np.random.default_rng([seed, 45211])
    age = np.clip(rng.normal(41, 10.6, rows), 18, 95).round()
    job, marital, education = rng.integers(0, 12, rows), rng.integers(0, 3, rows), rng.integers(0, 4, rows)
    default, housing, loan = (rng.random(rows) < p for p in (0.02, 0.56, 0.16))
    balance = np.round(rng.lognormal(6.5, 1.6, rows) - 300)
    contact, day, month = rng.integers(0, 3, rows), rng.integers(1, 32, rows), rng.integers(0, 12, rows)
    duration = np.round(rng.lognormal(5.2, 0.9, rows))
    campaign = rng.geometric(0.38, rows)
    contacted = rng.random(rows) < 0.18
    pdays = np.where(contacted, rng.integers(1, 872, rows), -1)
    previous = np.where(contacted, rng.geometric(0.35, rows), 0)
    poutcome = np.where(contacted, rng.integers(0, 3, rows), 3)
    score = (np.log1p(duration) * 1.8 + (poutcome == 2) * 2.0 - housing * 0.7 - loan * 0.4 + (contact == 0) * 0.5
             + np.isin(month, (2, 8, 9, 11)) * 0.9 - np.log(campaign) * 0.3 + (age > 60) * 0.6)
    x = np.stack([age, job, marital, education, default, balance, housing, loan, contact, day, month, duration,
                  campaign, pdays, previous, poutcome], axis=1)
    return _split("bank-like", x, _label(rng, score, 0.117), seed)


A9A_GROUPS = (5, 8, 5, 16, 16, 7, 14, 6, 5, 2, 2, 2, 5, 30)  # one-hot groups, 123 columns


def a9a_like(*, seed: int = 0, rows: int = 32561) -> Dataset:
    rng = np.random.default_rng([seed, 32561])
    x = np.zeros((rows, sum(A9A_GROUPS)), dtype=np.float32)
    score = np.zeros(rows)
    at = 0
    for i, size in enumerate(A9A_GROUPS):
        level = rng.choice(size, size=rows, p=rng.dirichlet(np.full(size, 2.0)))
        x[np.arange(rows), at + level] = 1.0
        if i in (0, 3, 5, 6, 9, 10, 12):  # age, education, marital, occupation, sex, gains, hours carry signal
            score += rng.normal(0, 1.0, size)[level]
        at += size
    return _split("a9a-like", x, _label(rng, score, 0.24), seed)


def credit_like(*, seed: int = 0, rows: int = 30000) -> Dataset:
    rng = np.random.default_rng([seed, 30000])
    limit = np.maximum(np.round(rng.lognormal(11.7, 0.75, rows), -4), 10000.0)  # UCI: 10,000 NT$ and up
    sex, education, marriage = rng.integers(1, 3, rows), rng.integers(1, 5, rows), rng.integers(1, 4, rows)
    age = np.clip(rng.normal(35, 9, rows), 21, 79).round()
    pay = np.clip(np.cumsum(rng.choice([-1, 0, 1], size=(rows, 6), p=[0.35, 0.45, 0.2]), axis=1), -2, 8)
    bill = np.round(limit[:, None] * rng.beta(2, 3, (rows, 6)))
    paid = np.round(bill * rng.beta(1, 5, (rows, 6)))
    score = pay[:, 0] * 1.1 + pay[:, 1] * 0.4 - np.log(limit) * 0.5 - paid[:, 0] / (bill[:, 0] + 1) * 0.8
    x = np.column_stack([limit, sex, education, marriage, age, pay, bill, paid])
    return _split("credit-like", x, _label(rng, score, 0.221), seed)
