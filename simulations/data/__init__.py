"""Datasets: real-format loaders, offline packaged datasets, fixtures and vertical partitioners.

Importing this package registers every built-in dataset in ``DATASETS``.
"""

from simulations.data import cifar, har, imagefolder, jsonl, modelnet, packaged, phishing, text  # noqa: F401
from simulations.data.registry import DATASETS, load_dataset

__all__ = ["DATASETS", "load_dataset"]
