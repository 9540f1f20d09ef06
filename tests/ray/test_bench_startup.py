"""``overhead --startup``: the parts add up to the measured total, and the CPU accounting is physically
possible (what every process of the run spent, over the cores, fits in the time it ran)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from simulations.benchmarks.startup import PARTS, run_startup
from vfl.runtime.transport.placement import auto_max_actors

pytestmark = [pytest.mark.ray]


def test_startup_parts_sum_to_the_total_and_cpu_fits_the_cores(tmp_path: Path) -> None:
    result = run_startup(config="demo", sets=["data.train_subsample=256", "data.test_subsample=64"], out=tmp_path,
                         rounds=1)  # the parts' bookkeeping holds for any size
    assert json.loads((tmp_path / "startup.json").read_text())["startup_s"] == result["startup_s"]
    cores = os.cpu_count() or 1
    for kind in ("inprocess", "ray"):
        run = result["runs"][kind][0]
        parts = sum(run[p] for p in PARTS)
        assert abs(parts - run["total"]) <= 0.02 * run["total"] + 0.1, (kind, parts, run["total"])
        cpu = run["cpu_s"]
        assert cpu["total"] == pytest.approx(cpu["driver"] + cpu["actors"] + cpu["ray"])
        assert 0 < cpu["total"] / cores <= run["total"] - run["shutdown"]  # no process counted twice
    assert result["runs"]["inprocess"][0]["cpu_s"]["n_actors"] == 0
    assert result["runs"]["inprocess"][0]["ray_init"] < 0.01  # no Ray in-process
    ray = result["runs"]["ray"][0]["cpu_s"]
    assert ray["n_actors"] == 1 + min(4, auto_max_actors(cores))  # the server and the demo's party actors
    assert ray["actors"] > 0 and ray["ray"] > 0
    assert result["ray_cpu_floor_s"] <= result["startup_s"]["ray"]["total"]
    assert set(result["import_cpu_s"]) >= {"ray", "torch", "flwr", "runtime", "optimizer", "dynamo_imported", "torch._dynamo"}
