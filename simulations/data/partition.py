"""Vertical partitioners: one ``PartyShard`` per party + the server's ``LabelShard``.

Every shard keeps the dataset's sample order (row i is sample i at every party), so the shared
batch order of ``vfl.data.sampling`` aligns parties. Shards are numpy views (basic slicing) wherever
the split allows it; only uneven ``interleaved`` and ``tokens`` build new arrays.

Schemes: ``contiguous`` / ``interleaved`` feature ranges (tabular; images and views are
flattened first), ``quadrants`` (4 parties, 2x2 image blocks), ``strips`` (k vertical or
horizontal image strips), ``views`` (multiview: consecutive views per party), ``tokens`` (text:
a contiguous span of each sentence's whitespace tokens per party).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vfl.core.errors import ConfigError
from vfl.core.registry import Registry
from vfl.data.dataset import Dataset, LabelShard, PartyShard

Splitter = Callable[..., list[PartyShard]]
SCHEMES: Registry[Splitter] = Registry("partition scheme")
IMAGE_MODALITIES = ("image", "multiview")
MODALITIES: dict[str, tuple[str, ...]] = {  # which data each scheme applies to
    "contiguous": ("tabular", *IMAGE_MODALITIES), "interleaved": ("tabular", *IMAGE_MODALITIES),
    "quadrants": IMAGE_MODALITIES, "strips": IMAGE_MODALITIES, "views": ("multiview",), "tokens": ("text",),
}


def partition(dataset: Dataset, *, num_parties: int, scheme: str, seed: int = 0,
              **opts: Any) -> tuple[list[PartyShard], LabelShard]:
    """Split ``dataset`` vertically over ``num_parties`` parties with ``scheme``.

    ``opts`` are the scheme's options (``sizes``/``weights``, ``orientation``); ``seed`` is
    reserved for randomized schemes (the built-in ones are deterministic).
    """
    if not isinstance(num_parties, int | np.integer) or num_parties < 1:
        raise ConfigError("num_parties", f"must be an integer >= 1, got {num_parties!r}")
    split = SCHEMES.get(scheme, "data.partition")
    allowed = [k for k, p in inspect.signature(split).parameters.items() if p.kind is p.KEYWORD_ONLY]
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        raise ConfigError("data.partition_opts", f"scheme {scheme!r} has no option(s) {unknown}; "
                          f"allowed: {allowed or 'none'}")
    shards = split(dataset, int(num_parties), **opts)
    labels = LabelShard(dataset.y_train, dataset.y_test, dataset.num_classes, dataset.metric)
    return shards, labels


def describe(shards: Sequence[PartyShard]) -> list[str]:
    """One line per shard: party, what it holds, input shape."""
    return [f"party {s.party}: {s.description} -> input {s.input_shape}" for s in shards]


def _need(ds: Dataset, scheme: str) -> None:
    if ds.modality not in MODALITIES.get(scheme, (ds.modality,)):
        ok = ", ".join(n for n in SCHEMES.names() if ds.modality in MODALITIES.get(n, ()))
        raise ConfigError("data.partition", f"{scheme!r} does not apply to {ds.modality} data "
                          f"({ds.name}); allowed for {ds.modality}: {ok}")


def _too_many(m: int, n: int, what: str) -> ConfigError:
    return ConfigError("num_parties", f"{m} parties but only {n} {what}; allowed: 1..{n}")


def split_sizes(total: int, m: int, *, sizes: Sequence[int] | None = None,
                weights: Sequence[float] | None = None, what: str = "features") -> list[int]:
    """Per-party counts: even (first ``total % m`` get one more), explicit ``sizes``, or ``weights``."""
    if m > total:
        raise _too_many(m, total, what)
    if sizes is not None and weights is not None:
        raise ConfigError("data.partition_opts", "give either 'sizes' or 'weights', not both")
    if sizes is not None:
        out = [int(s) for s in sizes]
        if len(out) != m or any(s < 1 for s in out) or sum(out) != total:
            raise ConfigError("data.partition_opts", f"'sizes' must be {m} positive counts summing to {total} "
                              f"{what}, got {list(sizes)}")
        return out
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if len(w) != m or not np.all(w > 0):
            raise ConfigError("data.partition_opts", f"'weights' must be {m} positive numbers, got {list(weights)}")
        extra = total - m  # everyone gets 1, the rest by largest remainder
        raw = w / w.sum() * extra
        out = np.floor(raw).astype(int)
        out[np.argsort(-(raw - out), kind="stable")[: extra - out.sum()]] += 1
        return [int(s) + 1 for s in out]
    return [total // m + (1 if i < total % m else 0) for i in range(m)]


def _flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), -1)  # a view for the C-contiguous arrays loaders produce


def _range(a: int, b: int) -> str:
    return f"{a}-{b - 1}" if b - a > 1 else f"{a}"


@SCHEMES.register("contiguous")
def contiguous(ds: Dataset, m: int, *, sizes: Sequence[int] | None = None,
               weights: Sequence[float] | None = None) -> list[PartyShard]:
    """Consecutive feature ranges (views); uneven with ``sizes`` or ``weights``."""
    _need(ds, "contiguous")
    xtr, xte = _flat(ds.x_train), _flat(ds.x_test)
    bounds = np.cumsum([0, *split_sizes(xtr.shape[1], m, sizes=sizes, weights=weights)])
    return [PartyShard(i, xtr[:, a:b], xte[:, a:b], f"features {_range(a, b)}")
            for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))]


@SCHEMES.register("interleaved")
def interleaved(ds: Dataset, m: int, *, sizes: Sequence[int] | None = None,
                weights: Sequence[float] | None = None) -> list[PartyShard]:
    """Round-robin features (party i gets i, i+M, ...: strided views); uneven = weighted round robin (copies)."""
    _need(ds, "interleaved")
    xtr, xte = _flat(ds.x_train), _flat(ds.x_test)
    f = xtr.shape[1]
    if sizes is None and weights is None:
        if m > f:
            raise _too_many(m, f, "features")
        return [PartyShard(i, xtr[:, i::m], xte[:, i::m], f"features {i}::{m} ({len(range(i, f, m))})")
                for i in range(m)]
    counts = np.asarray(split_sizes(f, m, sizes=sizes, weights=weights))
    owner = np.empty(f, dtype=np.int64)  # feature j goes to the party most behind its quota
    given = np.zeros(m)
    for j in range(f):
        k = int(np.argmin(np.where(given < counts, given / counts, np.inf)))
        owner[j] = k
        given[k] += 1
    cols = [np.flatnonzero(owner == i) for i in range(m)]
    return [PartyShard(i, xtr[:, c], xte[:, c], f"{len(c)} interleaved features from {c[0]}") for i, c in enumerate(cols)]


@SCHEMES.register("quadrants")
def quadrants(ds: Dataset, m: int) -> list[PartyShard]:
    """Exactly 4 parties: top-left, top-right, bottom-left, bottom-right image blocks (views)."""
    _need(ds, "quadrants")
    if m != 4:
        raise ConfigError("num_parties", f"'quadrants' needs exactly 4 parties, got {m}; allowed: 4")
    h, w = ds.x_train.shape[-2:]
    if h < 2 or w < 2:
        raise ConfigError("data.partition", f"'quadrants' needs images of at least 2x2, got {h}x{w}")
    hh, hw = h // 2, w // 2
    blocks = [("top-left", 0, hh, 0, hw), ("top-right", 0, hh, hw, w),
              ("bottom-left", hh, h, 0, hw), ("bottom-right", hh, h, hw, w)]
    return [PartyShard(i, ds.x_train[..., r0:r1, c0:c1], ds.x_test[..., r0:r1, c0:c1],
                       f"{name} rows {_range(r0, r1)} cols {_range(c0, c1)}")
            for i, (name, r0, r1, c0, c1) in enumerate(blocks)]


@SCHEMES.register("strips")
def strips(ds: Dataset, m: int, *, orientation: str = "vertical", sizes: Sequence[int] | None = None,
           weights: Sequence[float] | None = None) -> list[PartyShard]:
    """``m`` image strips (views): ``vertical`` splits the width, ``horizontal`` the height."""
    _need(ds, "strips")
    if orientation not in ("vertical", "horizontal"):
        raise ConfigError("data.partition_opts", f"orientation: allowed vertical|horizontal, got {orientation!r}")
    axis = -1 if orientation == "vertical" else -2
    n = ds.x_train.shape[axis]
    what = "columns" if axis == -1 else "rows"
    bounds = np.cumsum([0, *split_sizes(n, m, sizes=sizes, weights=weights, what=what)])

    def cut(x: np.ndarray, a: int, b: int) -> np.ndarray:
        return x[..., a:b] if axis == -1 else x[..., a:b, :]

    return [PartyShard(i, cut(ds.x_train, a, b), cut(ds.x_test, a, b), f"{orientation} strip {what} {_range(a, b)}")
            for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))]


@SCHEMES.register("views")
def views(ds: Dataset, m: int, *, sizes: Sequence[int] | None = None) -> list[PartyShard]:
    """Multiview: consecutive views per party (V/M each; if M does not divide V the first V mod M get one more)."""
    _need(ds, "views")
    v = ds.x_train.shape[1]
    bounds = np.cumsum([0, *split_sizes(v, m, sizes=sizes, what="views")])
    return [PartyShard(i, ds.x_train[:, a:b], ds.x_test[:, a:b], f"views {_range(a, b)}")
            for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))]


def _token_spans(texts: np.ndarray, m: int) -> list[np.ndarray]:
    cols: list[list[str]] = [[] for _ in range(m)]
    for t in texts:
        toks = str(t).split()
        n = len(toks)
        for i in range(m):
            cols[i].append(" ".join(toks[i * n // m:(i + 1) * n // m]))
    out = []
    for c in cols:
        a = np.empty(len(c), dtype=object)
        a[:] = c
        out.append(a)
    return out


@SCHEMES.register("tokens")
def tokens(ds: Dataset, m: int) -> list[PartyShard]:
    """Text: party i gets tokens [i*n/M, (i+1)*n/M) of each n-token sentence (may be empty)."""
    _need(ds, "tokens")
    tr, te = _token_spans(ds.x_train, m), _token_spans(ds.x_test, m)
    return [PartyShard(i, tr[i], te[i], f"token span {i + 1}/{m} of each sentence") for i in range(m)]

