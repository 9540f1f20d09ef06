"""The speed-ups are one folder behind one boundary: with ``vfl/runtime/fast/`` unimportable (as if deleted)
or turned off by ``VFL_PLAIN``, a run takes the plain flwr/torch code and trains exactly what it trains
with them (same seed, seeded noise: the same losses and bytes, digit for digit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = """
import importlib.abc, json, sys
class NoFast(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "vfl.runtime.fast" or name.startswith("vfl.runtime.fast."):
            raise ImportError(f"{name} is deleted here")
if BLOCK:
    sys.meta_path.insert(0, NoFast())
import vfl
r = vfl.run("demo", transport="inprocess", progress=False, overrides={
    "train.epochs": 2, "data.train_subsample": 256, "data.test_subsample": 64, "privacy.noise_rng": "seeded",
    "transport.max_actors": 1})  # the four parties in one host: the batched party step is exercised
from vfl.runtime import accel
print(json.dumps({"loss": [h["train_loss"] for h in r.history], "acc": [h["test_acc"] for h in r.history],
                  "bytes": r.summary["total_bytes_up"] + r.summary["total_bytes_down"],
                  "fast": sorted(m for m in sys.modules if m.startswith("vfl.runtime.fast")),
                  "builders": accel.new_metadata.__module__, "step": accel.step_all.__module__}))
"""


def _run(*, block: bool, plain: str = "") -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VFL_PLAIN": plain}
    done = subprocess.run([sys.executable, "-c", f"BLOCK = {block}\n{RUN}"], env=env, capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fast() -> dict:
    out = _run(block=False)
    assert out["builders"] == "vfl.runtime.fast.records" and out["step"] == "vfl.runtime.fast.torch_step"  # control
    return out


def test_without_the_fast_folder_a_run_trains_the_same(fast) -> None:
    plain = _run(block=True)
    assert plain["fast"] == [] and plain["builders"] == plain["step"] == "vfl.runtime.accel"
    assert (plain["loss"], plain["acc"], plain["bytes"]) == (fast["loss"], fast["acc"], fast["bytes"])


def test_vfl_plain_turns_every_speed_up_off_with_the_same_result(fast) -> None:
    plain = _run(block=False, plain="all")
    assert plain["builders"] == plain["step"] == "vfl.runtime.accel"
    assert (plain["loss"], plain["acc"], plain["bytes"]) == (fast["loss"], fast["acc"], fast["bytes"])
