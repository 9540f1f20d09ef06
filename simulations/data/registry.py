"""The dataset registry: name -> loader ``(*, data_dir, seed, **opts) -> Dataset``.

Importing ``simulations.data`` registers every built-in dataset; configs say ``dataset: <name>``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simulations.data.common import resolve_data_dir
from vfl.core.errors import ConfigError
from vfl.core.registry import Registry
from vfl.data.dataset import Dataset

# Reads one dataset from ``data_dir`` (or an installed package) and splits it by ``seed``:
# ``(*, data_dir: Path | None, seed: int, **its own keyword options) -> Dataset``. Each loader names its
# options (checked against ``data.load_opts`` in ``load_dataset``), which a Protocol with ``**opts``
# would refuse, hence a plain callable.
Loader = Callable[..., Dataset]


DATASETS: Registry[Loader] = Registry("dataset")
_BUNDLED: set[Loader] = set()


def bundled(loader: Loader) -> Loader:
    """Mark a loader whose data ships inside an installed package (no ``data_dir``, nothing to fetch):
    ``vfl datasets`` lists it as ready offline. Apply below ``@DATASETS.register(...)``."""
    _BUNDLED.add(loader)
    return loader


def is_bundled(name: str) -> bool:
    """Does the registered dataset ``name`` load with no files of the user's (``bundled``)?"""
    return DATASETS.get(name, "dataset") in _BUNDLED


def load_dataset(name: str, *, data_dir: str | Path | None = None, seed: int = 0, **opts: Any) -> Dataset:
    """Load a registered dataset; ``data_dir`` falls back to ``$VFL_DATA_DIR``.

    ``opts`` go to the loader (e.g. ``size``/``channels`` for image folders). A ``module:factory``
    name is a user's dataset factory (``simulations.data.custom``).
    """
    # the built-in loaders are registered: importing this module first ran simulations/data/__init__.py
    from simulations.data.custom import is_import_string, load_custom_dataset

    if is_import_string(name):
        return load_custom_dataset(name, data_dir=resolve_data_dir(data_dir), seed=int(seed), **opts)

    loader = DATASETS.get(name, "dataset")
    allowed = [k for k, v in inspect.signature(loader).parameters.items()
               if v.kind is v.KEYWORD_ONLY and k not in ("data_dir", "seed")]
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        raise ConfigError("data.load_opts", f"{name} has no option(s) {unknown}; allowed: {allowed or 'none'}")
    return loader(data_dir=resolve_data_dir(data_dir), seed=int(seed), **opts)
