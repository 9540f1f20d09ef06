"""SecAgg mode ``announced`` with ``train.on_dropout: skip-party`` over Ray actors (one party per actor): one
party's actor exits mid-epoch, another hangs past transport.round_timeout_s and is killed; each of their rounds
stays closed (no sum, its step skipped), the survivors are announced and every later round is exactly their sum."""

from __future__ import annotations

import numpy as np
import pytest

import strategies  # noqa: F401
from tests.ray.test_secagg_dropout_ray import run_two_dropouts
from vfl.privacy import Accountant
from vfl.privacy.accounting.events import PBMEvent

pytestmark = [pytest.mark.ray]
M = 4


def test_announced_skip_party_over_ray_skips_a_dead_and_a_late_partys_rounds(ray_local, monkeypatch) -> None:
    res, seen = run_two_dropouts(monkeypatch, {"secagg_mode": "announced"})
    s = res.summary
    assert s["transport"] == "ray" and s["epochs"] == 2
    died, late = s["dropouts"]
    assert (died["party"], died["epoch"], died["step"], died["cause"]) == ("party2", 0, 3, "died")
    assert (late["party"], late["epoch"], late["step"], late["cause"]) == ("party1", 1, 2, "timeout")
    assert all(r["skipped"] and r["contributed"] == [] for r in (died, late))
    assert [r["parties_active"] for r in res.history] == [3, 2]
    assert "train:0:3" not in seen["sums"] and "train:1:2" not in seen["sums"]  # closed: never summed
    for rnd, summed in (("train:0:4", [1, 2, 4]), ("train:1:3", [1, 4]), ("train:1:7", [1, 4])):
        total, got = seen["sums"][rnd]
        assert list(got) == summed
        truth = sum(np.asarray(seen["inputs"][p][rnd], dtype=np.int64) for p in summed)
        np.testing.assert_array_equal(np.asarray(total), truth % (1 << s["bits_per_element"]))
    assert np.isfinite(res.history[-1]["train_loss"]) and s["final_test_acc"] is not None
    acc = Accountant()
    for m in (3, 2):  # as semi-honest recovering the same rounds: each epoch with the parties still in the run
        acc.record(PBMEvent(b=16, beta=0.25, num_parties=m, dim=4, count=1))
    assert s["epsilon"] == pytest.approx(acc.epsilon(1e-5)[0])
