"""Bring-your-own dataset by import string: ``dataset: "my_pkg.data:make_dataset"``.

The factory is called like the registered loaders, with the keywords its signature accepts among
``seed`` (the run seed, for a seeded train/test split) and ``data_dir`` (``data.data_dir`` or
``$VFL_DATA_DIR``), plus ``data.load_opts``. It returns either a ``vfl.data.dataset.Dataset`` or a mapping
with the arrays ``x_train``, ``y_train``, ``x_test``, ``y_test`` (labels: integer class ids from 0)
and optionally ``num_classes`` (default: the largest label + 1), ``modality`` (``tabular``,
``image``, ``multiview``, ``text``; default ``tabular``) and ``name``. The features are then split
among the parties by ``data.partition`` like any dataset (``contiguous``: tabular columns, or the
flattened image, in consecutive blocks, one per party). The factory runs in the driver (the
pre-run check) and in every actor that loads data, so it must be importable and deterministic there.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from parties.vertical.custom_models import is_import_string, load_factory
from vfl.core.errors import ConfigError, DataError
from vfl.data.dataset import Dataset

__all__ = ["is_import_string", "load_custom_dataset"]

REQUIRED = ("x_train", "y_train", "x_test", "y_test")
MODALITIES = ("tabular", "image", "multiview", "text")


def load_custom_dataset(target: str, *, data_dir: Path | None, seed: int, **opts: Any) -> Dataset:
    """Call the factory ``target`` (``module:attr``) and check what it returns; ConfigError naming
    ``dataset`` (or ``data.load_opts``) otherwise."""
    factory = load_factory(target, key="dataset")
    kwargs = {**_accepted(factory, target, opts, given={"seed": seed, "data_dir": data_dir}), **opts}
    try:
        out = factory(**kwargs)
    except (ConfigError, DataError):
        raise
    except Exception as exc:
        raise ConfigError("dataset", f"{target!r} failed: {type(exc).__name__}: {exc}") from None
    return _as_dataset(out, target)


def _accepted(factory: Callable[..., Any], target: str, opts: Mapping[str, Any], *,
              given: dict[str, Any]) -> dict[str, Any]:
    """``seed``/``data_dir`` if the factory takes them; unknown ``load_opts`` are refused."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin without a signature: pass nothing extra
        return {}
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    named = {k for k, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    unknown = sorted(set(opts) - named) if not var_kw else []
    if unknown:
        raise ConfigError("data.load_opts", f"{target!r} takes no option(s) {unknown}; allowed: "
                          f"{sorted(named - {'seed', 'data_dir'}) or 'none'}")
    return {k: v for k, v in given.items() if var_kw or k in named}


def _as_dataset(out: Any, target: str) -> Dataset:
    if isinstance(out, Dataset):
        return _checked(out, target)
    if not isinstance(out, Mapping):
        raise ConfigError("dataset", f"{target!r} returned a {type(out).__name__}; expected a vfl.data.dataset.Dataset or a "
                          f"mapping with {', '.join(REQUIRED)}")
    missing = [k for k in REQUIRED if k not in out]
    if missing:
        raise ConfigError("dataset", f"{target!r} returned a mapping without {', '.join(missing)}; "
                          f"required: {', '.join(REQUIRED)}")
    modality = out.get("modality", "tabular")
    if modality not in MODALITIES:
        raise ConfigError("dataset", f"{target!r} returned modality={modality!r}; allowed: {', '.join(MODALITIES)}")
    arrays = {k: np.asarray(out[k]) for k in REQUIRED}
    for k in ("x_train", "x_test"):
        if modality == "text":
            arrays[k] = arrays[k].astype(object)
        elif arrays[k].dtype.kind not in "biuf":
            raise ConfigError("dataset", f"{target!r} returned {k} of dtype {arrays[k].dtype}; expected numbers")
        else:
            arrays[k] = arrays[k].astype(np.float32)
    labels = _labels(arrays, target)
    num_classes = int(out.get("num_classes") or (int(max(labels.max(initial=0), 1)) + 1))
    try:
        ds = Dataset(name=str(out.get("name") or target), num_classes=num_classes, modality=modality,
                     x_train=arrays["x_train"], y_train=arrays["y_train"], x_test=arrays["x_test"],
                     y_test=arrays["y_test"])
    except DataError as exc:
        raise ConfigError("dataset", f"{target!r} returned inconsistent arrays: {exc}") from None
    return _checked(ds, target)


def _labels(arrays: dict[str, np.ndarray], target: str) -> np.ndarray:
    for k in ("y_train", "y_test"):
        y = arrays[k]
        if y.ndim != 1 or y.dtype.kind not in "biuf" or (y.dtype.kind == "f" and not np.all(np.mod(y, 1) == 0)):
            raise ConfigError("dataset", f"{target!r} returned {k} of shape {y.shape} and dtype {y.dtype}; "
                              "expected a 1-D array of integer class ids")
        arrays[k] = y.astype(np.int64)
    return np.concatenate([arrays["y_train"], arrays["y_test"]])


def _checked(ds: Dataset, target: str) -> Dataset:
    """Sizes, label range (a regression ``Dataset`` checked its targets itself), no infinity, and NaN only as a
    tabular column's missing value (a strategy that cannot route it refuses it before the run:
    ``vfl/engine/data_support.py``)."""
    if ds.num_train == 0 or ds.num_test == 0:
        raise ConfigError("dataset", f"{target!r} returned {ds.num_train} train and {ds.num_test} test samples; "
                          "both splits must be non-empty")
    for k in ("y_train", "y_test"):
        y = getattr(ds, k)
        if len(y) and not ds.is_regression and (int(y.min()) < 0 or int(y.max()) >= ds.num_classes):
            raise ConfigError("dataset", f"{target!r} returned {k} outside [0, num_classes={ds.num_classes})")
    if ds.modality != "text":
        for k in ("x_train", "x_test"):
            x = getattr(ds, k)
            if len(x) and np.any(np.isinf(x)):
                raise ConfigError("dataset", f"{target!r} returned {k} with infinite values")
            if len(x) and ds.modality != "tabular" and np.any(np.isnan(x)):  # tabular NaN: missing values
                raise ConfigError("dataset", f"{target!r} returned {k} with NaN values")
    return ds
