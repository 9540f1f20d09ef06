"""Datasets: real-format loaders, offline packaged datasets, fixtures and vertical partitioners."""
