"""Datasets: real-format loaders, offline packaged datasets, fixtures and vertical partitioners.

Importing this package registers every built-in dataset in ``DATASETS``.
"""

from simulations.data import (  # noqa: F401
    bank,
    cifar,
    credit,
    har,
    imagefolder,
    jsonl,
    libsvm,
    modelnet,
    packaged,
    phishing,
    text,
)
from simulations.data.registry import DATASETS, load_dataset

__all__ = ["DATASETS", "load_dataset"]
