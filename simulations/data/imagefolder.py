"""Class-per-folder image trees (the ImageNet "ImageFolder" layout), resized small.

``<root>/train/<class>/*.{JPEG,jpg,png}`` and ``<root>/val/<class>/*`` (or ``test/``): the val
set must already be sorted into class folders (as in the common ImageNet-100 subsets).
Output: ``(N, C, size, size)`` float32 in [0, 1]; default 32x32 RGB.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulations.data.common import check_image_opts, load_images, missing
from simulations.data.registry import DATASETS
from vfl.core.errors import DataError
from vfl.data.dataset import Dataset

URL = "https://www.image-net.org/ (ImageNet; ImageNet-100 is a 100-class subset of ILSVRC-2012)"
IMAGE_EXT = {".jpeg", ".jpg", ".png", ".bmp", ".webp"}


def _files(d: Path, limit: int | None) -> list[Path]:
    fs = sorted(f for f in d.iterdir() if f.suffix.lower() in IMAGE_EXT)
    return fs[:limit] if limit else fs


def read_tree(name: str, root: Path, *, size: int, channels: int, max_per_class: int | None) -> Dataset:
    """Read ``root/train`` and ``root/val|test`` class folders into a ``Dataset``."""
    check_image_opts(name, size, channels)
    train = root / "train"
    val = next((root / s for s in ("val", "test") if (root / s).is_dir()), None)
    if not train.is_dir() or val is None:
        raise DataError(f"{name}: expected '{root}/train/<class>/*.JPEG' and '{root}/val/<class>/*.JPEG'; "
                        f"this loader never downloads - obtain the images from {URL}")
    classes = tuple(sorted(d.name for d in train.iterdir() if d.is_dir()))
    if len(classes) < 2:
        raise DataError(f"{name}: {train} needs at least 2 class folders, found {len(classes)}")
    out = []
    for split in (train, val):
        unknown = sorted(d.name for d in split.iterdir() if d.is_dir() and d.name not in classes)
        if unknown:
            raise DataError(f"{name}: {split} has class folders not in train/: {unknown[:5]}")
        files: list[Path] = []
        labels: list[int] = []
        for c, cls in enumerate(classes):
            if (split / cls).is_dir():
                fs = _files(split / cls, max_per_class)
                files += fs
                labels += [c] * len(fs)
        if not files:
            raise DataError(f"{name}: no images ({', '.join(sorted(IMAGE_EXT))}) under {split}/<class>/")
        out.append((load_images(files, size=size, channels=channels), np.asarray(labels, dtype=np.int64)))
    (x_tr, y_tr), (x_te, y_te) = out
    return Dataset(name, x_tr, y_tr, x_te, y_te, len(classes), "image", "accuracy", classes)


@DATASETS.register("imagefolder")
def load_imagefolder(*, data_dir: Path | None, seed: int = 0, size: int = 32, channels: int = 3,
                     max_per_class: int | None = None) -> Dataset:
    """Any ImageFolder tree at ``<data_dir>/imagefolder`` (or ``<data_dir>`` itself): (N, C, s, s)."""
    if data_dir is not None:
        for root in (data_dir / "imagefolder", data_dir):
            if (root / "train").is_dir():
                return read_tree("imagefolder", root, size=size, channels=channels, max_per_class=max_per_class)
    raise missing("imagefolder", expected=("imagefolder/train/<class>/*.JPEG", "imagefolder/val/<class>/*.JPEG"),
                  url=URL, data_dir=data_dir)


@DATASETS.register("imagenet100")
def load_imagenet100(*, data_dir: Path | None, seed: int = 0, size: int = 32, channels: int = 3,
                     max_per_class: int | None = None) -> Dataset:
    """ImageNet-100 at ``<data_dir>/imagenet100/{train,val}/<wnid>/*.JPEG``: (N, C, s, s)."""
    root = data_dir / "imagenet100" if data_dir is not None else None
    if root is None or not (root / "train").is_dir():
        raise missing("imagenet100", expected=("imagenet100/train/<wnid>/*.JPEG", "imagenet100/val/<wnid>/*.JPEG"),
                      url=URL, data_dir=data_dir)
    return read_tree("imagenet100", root, size=size, channels=channels, max_per_class=max_per_class)
