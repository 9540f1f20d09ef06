"""The peer comparison runs Flower's vertical design and the project on the same task and they agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulations.benchmarks.overhead import synthetic_har
from simulations.benchmarks.peers import ACC_TOL, launch, task_sets

pytestmark = [pytest.mark.ray]


def test_flower_and_vfl_do_the_same_work(tmp_path: Path) -> None:
    data = synthetic_har(tmp_path / "data")
    steps = 6
    sets = task_sets(parties=2, steps=steps, batch=100, test=200, data_dir=str(data))
    rows = [launch(system, transport, sets=sets, steps=steps, warmup=1, out=tmp_path, timeout=600)
            for system, transport in (("flower", "flwr-simulation-ray"), ("vfl", "inprocess"))]
    flower, vfl = rows
    assert flower["system"] == "flower" and vfl["transport"] == "inprocess"
    assert len(flower["step_ms_all"]) == steps  # every step went through Flower's grid and came back
    assert abs(flower["final_acc"] - vfl["final_acc"]) <= ACC_TOL  # same init, data, batch order
    assert flower["bytes_per_step"] > 0 and vfl["bytes_per_step"] > 0
    assert 0 < flower["startup_s"] and 0 < vfl["startup_s"]
