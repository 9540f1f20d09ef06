"""``dataset: "module:factory"``: a user's dataset factory, resolved like the models by import string."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.data.registry import load_dataset
from vfl.core.errors import ConfigError


def test_a_mapping_factory_gets_the_seed_and_load_opts():
    ds = load_dataset("tests.support.byo_data:blobs", seed=3, n=40, features=5)
    assert (ds.num_train, ds.num_test, ds.num_classes, ds.modality) == (30, 10, 2, "tabular")
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int64 and ds.x_train.shape[1] == 5
    assert np.array_equal(load_dataset("tests.support.byo_data:blobs", seed=3, n=40, features=5).x_train, ds.x_train)
    assert not np.array_equal(load_dataset("tests.support.byo_data:blobs", seed=4, n=40, features=5).x_train, ds.x_train)


def test_a_dataset_factory_without_seed_is_called_without_it():
    ds = load_dataset("tests.support.byo_data:as_dataset", seed=1)
    assert ds.name == "stairs" and ds.num_classes == 3


@pytest.mark.parametrize("target, key, match", [
    ("tests.no_such_module:f", "dataset", "cannot import 'tests.no_such_module:f'.*ModuleNotFoundError"),
    ("tests.support.byo_data:nope", "dataset", "module 'tests.support.byo_data' has no attribute 'nope'"),
    ("tests.support.byo_data:a_list", "dataset", "returned a list; expected a vfl.data.dataset.Dataset or a mapping"),
    ("tests.support.byo_data:missing_test", "dataset", "mapping without x_test, y_test"),
    ("tests.support.byo_data:bad_labels", "dataset", r"y_train outside \[0, num_classes=2\)"),
    ("tests.support.byo_data:mismatched", "dataset", "inconsistent arrays: .*4 train inputs but 3 labels"),
    ("tests.support.byo_data:raises", "dataset", "failed: RuntimeError: the bucket is empty"),
])
def test_a_bad_factory_is_one_config_error(target, key, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_dataset(target, seed=0)
    assert err.value.key == key


def test_unknown_load_opts_are_named():
    with pytest.raises(ConfigError, match=r"takes no option\(s\) \['size'\]; allowed: \['features', 'n'\]") as err:
        load_dataset("tests.support.byo_data:blobs", size=3)
    assert err.value.key == "data.load_opts"


