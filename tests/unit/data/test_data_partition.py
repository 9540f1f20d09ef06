"""Vertical partitioners: full, disjoint coverage; views not copies; clear errors for bad splits."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.data.partition import SCHEMES, describe, partition, split_sizes
from vfl.core.errors import ConfigError
from vfl.data.dataset import Dataset


def _ds(x_shape: tuple[int, ...], modality: str = "tabular", n_test: int = 3) -> Dataset:
    """Inputs whose values are their flat feature index (+ sample offset), so coverage is checkable."""
    n = x_shape[0]
    per = int(np.prod(x_shape[1:]))
    x = (np.arange(n)[:, None] * 10_000 + np.arange(per)[None]).reshape(x_shape).astype(np.float32)
    n_test = min(n_test, n)
    xt = x[:n_test].copy()
    return Dataset("toy", x, np.arange(n) % 2, xt, np.arange(n_test) % 2, 2, modality)  # type: ignore[arg-type]


def _feature_ids(shards) -> list[np.ndarray]:
    return [s.x_train[0].reshape(-1).astype(int) for s in shards]  # sample 0 holds the feature ids


@pytest.mark.parametrize("scheme,opts", [("contiguous", {}), ("interleaved", {}),
                                         ("contiguous", {"sizes": [1, 5, 4]}),
                                         ("contiguous", {"weights": [1, 2, 7]}),
                                         ("interleaved", {"weights": [3, 1, 1]})])
def test_every_feature_in_exactly_one_party(scheme, opts):
    ds = _ds((7, 10))
    shards, labels = partition(ds, num_parties=3, scheme=scheme, **opts)
    ids = np.concatenate(_feature_ids(shards))
    assert sorted(ids.tolist()) == list(range(10))
    assert [s.party for s in shards] == [0, 1, 2]
    assert all(s.x_train.shape[0] == 7 and s.x_test.shape[0] == 3 for s in shards)  # sample order kept
    np.testing.assert_array_equal(shards[1].x_train[:, 0] // 10_000, np.arange(7))
    assert labels.y_train is ds.y_train and labels.num_classes == 2
    if "sizes" in opts:
        assert [s.input_shape[0] for s in shards] == opts["sizes"]


def test_even_splits_are_views_and_describe():
    ds = _ds((5, 561))
    shards, _ = partition(ds, num_parties=5, scheme="contiguous")
    assert all(np.shares_memory(s.x_train, ds.x_train) for s in shards)
    assert shards[0].description == "features 0-112" and [s.input_shape[0] for s in shards] == [113, 112, 112, 112, 112]
    inter, _ = partition(ds, num_parties=5, scheme="interleaved")
    assert all(np.shares_memory(s.x_train, ds.x_train) for s in inter)
    assert describe(shards)[0].startswith("party 0: features 0-112")


def test_hundred_parties_are_cheap():
    ds = _ds((50, 3, 32, 32), "image")
    shards, _ = partition(ds, num_parties=100, scheme="contiguous")
    assert len(shards) == 100 and all(np.shares_memory(s.x_train, ds.x_train) for s in shards)
    assert sum(s.input_shape[0] for s in shards) == 3 * 32 * 32


def test_more_parties_than_features_names_num_parties():
    with pytest.raises(ConfigError) as e:
        partition(_ds((4, 6)), num_parties=7, scheme="contiguous")
    assert e.value.key == "num_parties" and "allowed: 1..6" in str(e.value)
    with pytest.raises(ConfigError, match="num_parties"):
        partition(_ds((4, 6)), num_parties=7, scheme="interleaved")
    with pytest.raises(ConfigError, match="num_parties"):
        partition(_ds((4, 6)), num_parties=0, scheme="contiguous")


def test_quadrants_reassemble_the_image():
    ds = _ds((4, 3, 7, 6), "image")
    shards, _ = partition(ds, num_parties=4, scheme="quadrants")
    tl, tr, bl, br = (s.x_train for s in shards)
    whole = np.concatenate([np.concatenate([tl, tr], axis=-1), np.concatenate([bl, br], axis=-1)], axis=-2)
    np.testing.assert_array_equal(whole, ds.x_train)
    assert shards[0].input_shape == (3, 3, 3) and shards[3].input_shape == (3, 4, 3)
    assert all(np.shares_memory(s.x_train, ds.x_train) for s in shards)
    with pytest.raises(ConfigError) as e:
        partition(ds, num_parties=3, scheme="quadrants")
    assert e.value.key == "num_parties" and "4" in str(e.value)


@pytest.mark.parametrize("orientation,axis", [("vertical", -1), ("horizontal", -2)])
def test_strips_cover_the_image(orientation, axis):
    ds = _ds((3, 1, 28, 28), "image")
    shards, _ = partition(ds, num_parties=3, scheme="strips", orientation=orientation)
    np.testing.assert_array_equal(np.concatenate([s.x_train for s in shards], axis=axis), ds.x_train)
    assert [s.x_train.shape[axis] for s in shards] == [10, 9, 9]
    with pytest.raises(ConfigError, match="num_parties"):
        partition(ds, num_parties=29, scheme="strips", orientation=orientation)
    with pytest.raises(ConfigError, match="orientation"):
        partition(ds, num_parties=2, scheme="strips", orientation="diagonal")


@pytest.mark.parametrize("m,per", [(6, [2] * 6), (12, [1] * 12), (5, [3, 3, 2, 2, 2])])
def test_views_cover_all_views(m, per):
    ds = _ds((2, 12, 1, 4, 4), "multiview")
    shards, _ = partition(ds, num_parties=m, scheme="views")
    assert [s.input_shape[0] for s in shards] == per and shards[0].input_shape[1:] == (1, 4, 4)
    np.testing.assert_array_equal(np.concatenate([s.x_train for s in shards], axis=1), ds.x_train)
    with pytest.raises(ConfigError, match="num_parties"):
        partition(ds, num_parties=13, scheme="views")


def test_tokens_split_each_sentence():
    x = np.array(["a b c d e", "one two", "x"], dtype=object)
    ds = Dataset("t", x, np.array([0, 1, 0]), x[:1], np.array([0]), 2, "text")
    shards, _ = partition(ds, num_parties=2, scheme="tokens")
    assert shards[0].x_train.tolist() == ["a b", "one", ""] and shards[1].x_train.tolist() == ["c d e", "two", "x"]
    assert shards[1].x_test.tolist() == ["c d e"]


def test_scheme_must_fit_the_modality_and_options():
    text = Dataset("t", np.array(["a b"], dtype=object), np.array([0]), np.array(["c"], dtype=object),
                   np.array([1]), 2, "text")
    with pytest.raises(ConfigError) as e:
        partition(text, num_parties=2, scheme="contiguous")
    assert e.value.key == "data.partition" and "tokens" in str(e.value)
    with pytest.raises(ConfigError, match="data.partition"):
        partition(_ds((3, 8)), num_parties=4, scheme="quadrants")
    with pytest.raises(ConfigError, match="allowed"):
        partition(_ds((3, 8)), num_parties=2, scheme="diagonal")
    with pytest.raises(ConfigError, match="data.partition_opts"):
        partition(_ds((3, 8)), num_parties=2, scheme="contiguous", sizes=[3, 3])
    with pytest.raises(ConfigError, match="data.partition_opts"):
        partition(_ds((3, 8)), num_parties=2, scheme="quadrants", bogus=1)
    assert set(SCHEMES.names()) == {"contiguous", "interleaved", "quadrants", "strips", "views", "tokens"}


def test_split_sizes():
    assert split_sizes(10, 3) == [4, 3, 3]
    assert split_sizes(10, 2, weights=[1, 1]) == [5, 5]
    assert sum(split_sizes(561, 10, weights=list(range(1, 11)))) == 561
