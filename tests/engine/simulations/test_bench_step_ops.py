"""simulations/benchmarks/step_ops.py: the opcode and call counts of one in-process epoch and one wire_floor
epoch (what #29.1's cuts were checked by) count both sides' own code, and leave no tracer behind."""

from __future__ import annotations

import sys

import numpy as np

from simulations.benchmarks import step_ops
from simulations.cli.runner import resolve_config
from simulations.data.fixtures import write_har
from simulations.data.source import ConfigDataSource


def test_step_ops_counts_the_runtime_and_the_floor(tmp_path):
    write_har(tmp_path, np.random.default_rng(0), sizes=(120, 40))
    cfg = resolve_config(None, ["name=ops", "strategy=npq", "dataset=har", "num_parties=3", "train.batch_size=50",
                                "train.epochs=3", "transport.max_actors=1", "model.embed_dim=4", "model.bottom_hidden=[8]",
                                "model.head_hidden=[8]", f"data.data_dir={tmp_path}"])
    before = sys.gettrace()
    run, floor, steps = step_ops.count_epochs(cfg, ConfigDataSource.from_config(cfg))
    assert sys.gettrace() is before and steps == 3
    ran, floored = run.by_function(), floor.by_function()
    assert ran["party_batch.py:train_together"] > 0 and ran["host.py:deliver"] > 0  # the runtime's dispatch
    assert floored["floors.py:split_epoch_times"] > 0 and floored["host.py:deliver"] == 0  # the floor has none
    assert sum(ran.values()) > sum(floored.values()) > 0 and run.calls() > floor.calls() > 0
