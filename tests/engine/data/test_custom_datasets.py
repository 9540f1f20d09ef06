"""``dataset: "module:factory"``: a user's dataset factory, resolved like the models by import string: the tests through in-process engine runs."""

from __future__ import annotations

import vfl.engine.api


def test_a_run_trains_on_a_factory_dataset_split_among_the_parties():
    res = vfl.engine.api.run({"dataset": "tests.support.byo_data:blobs", "num_parties": 2, "seed": 0,
                       "data": {"load_opts": {"n": 160, "features": 6}},
                       "train": {"epochs": 3, "batch_size": 40, "lr": 0.1, "optimizer": "adam"}})
    assert res.summary["epochs"] == 3 and res.summary["final_test_acc"] >= 0.8  # separable blobs
