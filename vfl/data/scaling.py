"""Z-scoring with the training rows' statistics, for loaders (``simulations/data``) and for a party that
standardizes its own aligned table (``KeyedTable.rows``)."""

from __future__ import annotations

import numpy as np


def standardize(x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Z-score both splits with the TRAIN mean/std (constant columns keep std 1), as float32. A NaN (a
    missing value) stays NaN and is left out of its column's statistics; a column with no value in
    train keeps its values (mean 0, std 1)."""
    if np.isnan(x_train).any():
        seen = (~np.isnan(x_train)).any(axis=0)
        filled = np.where(seen, x_train, 0.0)  # an all-NaN column: mean 0, std 1 (nanmean would warn)
        mu, sd = np.nanmean(filled, axis=0), np.nanstd(filled, axis=0)
    else:  # no missing value: the plain statistics (bit for bit what the loaders always computed)
        mu, sd = x_train.mean(axis=0), x_train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return ((x_train - mu) / sd).astype(np.float32), ((x_test - mu) / sd).astype(np.float32)
