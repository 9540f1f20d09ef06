"""``simulations.benchmarks.split_cost``: every row's run config is a valid run of that strategy (the
benchmark itself runs engines: `python -m simulations.benchmarks.split_cost --out DIR`)."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from simulations.benchmarks.split_cost import ROWS, run_config
from vfl.engine.schema import load_run_config


@pytest.mark.parametrize(("strategy", "model"), ROWS)
def test_each_row_is_a_valid_short_run(strategy, model):
    cfg = load_run_config(run_config(strategy, "/some/model" if model != "minilm" else None, steps=3, batch=4))
    assert cfg.strategy == strategy and cfg.train.epochs == 1 and cfg.data.train_subsample == 12
    assert cfg.train.threads_per_actor == 1 and cfg.train.driver_threads == 1
