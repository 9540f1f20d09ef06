"""ModelNet-10 as 12 rendered views per object (the MVCNN render trees), one party per view(s).

Layout (the MVCNN releases; a ModelNet-40 tree works too, only the 10 ModelNet-10 classes are read):
``<root>/<class>/<train|test>/<class>_<NNNN>.obj.shaded_v<VVV>.png`` (MVCNN "shaded images",
``modelnet40_images_new_12x``) or ``<root>/<class>/<train|test>/<class>_<NNNN>_<VVV>.{png,jpg}``
(``modelnet40v1``), views VVV = 001..012. ``<root>`` is the first of ROOTS found in the data dir.
Output: ``(N, V, C, size, size)`` float32 in [0, 1]; default 12 views, 32x32 grayscale.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from simulations.data.common import check_image_opts, load_images, require_dir
from simulations.data.registry import DATASETS
from vfl.core.errors import ConfigError, DataError
from vfl.data.dataset import Dataset

URL = ("https://modelnet.cs.princeton.edu/ (meshes) and the MVCNN 12-view renders at "
       "https://people.cs.umass.edu/~jcsu/papers/shape_recog/ (shaded_images.tar.gz)")
ROOTS = ("modelnet10-views", "modelnet10_images_new_12x", "modelnet40_images_new_12x", "modelnet40v1")
CLASSES = ("bathtub", "bed", "chair", "desk", "dresser", "monitor", "night_stand", "sofa", "table", "toilet")
TOTAL_VIEWS = 12
EXPECTED = (f"<one of {', '.join(ROOTS)}>/<class>/<train|test>/<class>_<NNNN>.obj.shaded_v<001..012>.png "
            "(or <class>_<NNNN>_<001..012>.png|jpg)",)
VIEW_FILE = re.compile(r"^(?P<obj>.+?)(?:\.obj\.shaded_v|_)(?P<view>\d{3})\.(?:png|jpe?g)$", re.IGNORECASE)


def parse_view_file(name: str) -> tuple[str, int] | None:
    """``'chair_0001.obj.shaded_v003.png'`` or ``'chair_0001_003.jpg'`` -> ``('chair_0001', 3)``."""
    m = VIEW_FILE.match(name)
    return (m["obj"], int(m["view"])) if m else None


def _objects(split_dir: Path, cls: str) -> list[list[Path]]:
    """The view files of every object of one class/split, each sorted by view number."""
    groups: dict[str, dict[int, Path]] = defaultdict(dict)
    for f in split_dir.iterdir():
        parsed = parse_view_file(f.name)
        if parsed is not None:
            groups[parsed[0]][parsed[1]] = f
    out = []
    for obj in sorted(groups):
        views = groups[obj]
        if sorted(views) != list(range(1, TOTAL_VIEWS + 1)):
            raise DataError(f"modelnet10: object {obj!r} in {split_dir} has views {sorted(views)}; "
                            f"expected 1..{TOTAL_VIEWS}")
        out.append([views[v] for v in range(1, TOTAL_VIEWS + 1)])
    return out


def _split(root: Path, split: str, views: int, size: int, channels: int) -> tuple[np.ndarray, np.ndarray]:
    stride = TOTAL_VIEWS // views  # like MVCNN: 12 -> every view, 6 -> every 2nd, ...
    files: list[Path] = []
    labels: list[int] = []
    for c, cls in enumerate(CLASSES):
        d = root / cls / split
        if not d.is_dir():
            raise DataError(f"modelnet10: missing class folder {d} (layout: {EXPECTED[0]}); source: {URL}")
        for obj in _objects(d, cls):
            files += obj[::stride]
            labels.append(c)
    if not labels:
        raise DataError(f"modelnet10: no view files in {root}/*/{split} matching {EXPECTED[0]}; source: {URL}")
    x = load_images(files, size=size, channels=channels)
    return x.reshape(len(labels), views, channels, size, size), np.asarray(labels, dtype=np.int64)


@DATASETS.register("modelnet10")
def load_modelnet10(*, data_dir: Path | None, seed: int = 0, size: int = 32, channels: int = 1,
                    views: int = TOTAL_VIEWS) -> Dataset:
    """ModelNet-10 12-view renders: (N, V, C, size, size) float32, 10 classes (multiview)."""
    check_image_opts("modelnet10", size, channels)
    if views < 1 or TOTAL_VIEWS % views:
        raise ConfigError("modelnet10.views", f"must divide {TOTAL_VIEWS} (1, 2, 3, 4, 6, 12), got {views}")
    root = require_dir("modelnet10", data_dir, ROOTS, expected=EXPECTED, url=URL)
    x_tr, y_tr = _split(root, "train", views, size, channels)
    x_te, y_te = _split(root, "test", views, size, channels)
    return Dataset("modelnet10", x_tr, y_tr, x_te, y_te, len(CLASSES), "multiview", "accuracy", CLASSES)
