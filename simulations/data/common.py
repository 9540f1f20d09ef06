"""Helpers shared by the loaders: locating files, one-message missing-data errors, splits, images.

Loaders never download: a missing file raises ``DataError`` naming the expected paths and the
public page where a user obtains them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vfl.core.errors import DataError
from vfl.data.sampling import derive_seed
from vfl.data.scaling import standardize as standardize  # the loaders' z-scoring, re-exported

ENV_DATA_DIR = "VFL_DATA_DIR"


def resolve_data_dir(data_dir: str | Path | None) -> Path | None:
    """``data_dir`` if given, else ``$VFL_DATA_DIR``, else ``None`` (packaged datasets need none)."""
    if data_dir is not None and str(data_dir) != "":
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_DATA_DIR, "")
    return Path(env).expanduser() if env else None


def missing(name: str, *, expected: Sequence[str], url: str, data_dir: Path | None, hint: str = "") -> DataError:
    """The single error for absent data: what files, where we looked, where to get them."""
    files = ", ".join(f"'{e}'" for e in expected)
    where = (f"under data directory '{data_dir}'" if data_dir is not None
             else f"(no data directory: set data.data_dir or ${ENV_DATA_DIR})")
    extra = f" {hint}" if hint else ""
    return DataError(f"{name}: expected {files} {where}; this loader never downloads - "
                     f"obtain the files from {url} and place them there.{extra}")


def require_dir(name: str, data_dir: Path | None, candidates: Sequence[str], *, expected: Sequence[str],
                url: str, hint: str = "") -> Path:
    """The first existing directory among ``data_dir/<candidate>``, else the missing-data error."""
    if data_dir is not None:
        for c in candidates:
            p = data_dir / c if c else data_dir
            if p.is_dir():
                return p
    raise missing(name, expected=expected, url=url, data_dir=data_dir, hint=hint)


def stratified_split(y: np.ndarray, *, test_fraction: float, seed: int, salt: str) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified train/test index split (sorted ids; each class keeps its proportion)."""
    rng = np.random.default_rng(derive_seed("split", salt, seed))
    train: list[np.ndarray] = []
    test: list[np.ndarray] = []
    for c in np.unique(y):
        ids = rng.permutation(np.flatnonzero(y == c))
        n_test = int(round(test_fraction * len(ids)))
        n_test = min(max(n_test, 1), len(ids) - 1) if len(ids) > 1 else 0
        test.append(ids[:n_test])
        train.append(ids[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def random_split(n: int, *, test_fraction: float, seed: int, salt: str) -> tuple[np.ndarray, np.ndarray]:
    """Seeded train/test index split of ``n`` samples (sorted ids; for regression targets, which have
    no classes to stratify by)."""
    ids = np.random.default_rng(derive_seed("split", salt, seed)).permutation(n)
    n_test = min(max(int(round(test_fraction * n)), 1), n - 1)
    return np.sort(ids[n_test:]), np.sort(ids[:n_test])


def labels_to_ids(raw: Sequence[str] | np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Map raw labels to ids: integers keep their value order, strings are sorted by name."""
    arr = np.asarray(raw)
    names, ids = np.unique(arr, return_inverse=True)
    return ids.astype(np.int64), tuple(str(n) for n in names)


def load_image(path: Path, *, size: int, channels: int) -> np.ndarray:
    """One image file as ``(C, size, size)`` float32 in [0, 1] (bilinear resize; 1 = grayscale)."""
    from PIL import Image

    try:
        with Image.open(path) as src:
            if src.format == "JPEG":
                src.draft("RGB" if channels == 3 else "L", (size, size))  # cheap JPEG downscale first
            im = src.convert("RGB" if channels == 3 else "L")
            if im.size != (size, size):
                im = im.resize((size, size), Image.Resampling.BILINEAR)
            a = np.asarray(im, dtype=np.float32) / 255.0
    except OSError as e:  # PIL's UnidentifiedImageError is an OSError
        raise DataError(f"cannot read image {path}: {e}") from e
    return a[None] if channels == 1 else a.transpose(2, 0, 1)


def check_image_opts(name: str, size: int, channels: int) -> None:
    """Reject impossible image options early (size >= 1, channels 1 or 3)."""
    from vfl.core.errors import ConfigError

    if int(size) < 1:
        raise ConfigError(f"{name}.size", f"must be >= 1, got {size}")
    if channels not in (1, 3):
        raise ConfigError(f"{name}.channels", f"allowed: 1 (grayscale) or 3 (RGB), got {channels}")


def load_images(paths: Sequence[Path], *, size: int, channels: int, threads: int | None = None) -> np.ndarray:
    """Many image files -> ``(n, C, size, size)`` float32 in [0, 1], decoded on a few threads."""
    from concurrent.futures import ThreadPoolExecutor

    out = np.empty((len(paths), channels, size, size), dtype=np.float32)
    workers = threads or min(8, os.cpu_count() or 1)

    def put(i: int) -> None:
        out[i] = load_image(paths[i], size=size, channels=channels)

    if workers <= 1 or len(paths) < 64:
        for i in range(len(paths)):
            put(i)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(put, range(len(paths))))
    return out
