"""Dropouts inside a round over Ray actors (one party per actor): one party's actor exits mid-round,
another hangs past transport.round_timeout_s and is killed; with skip-party the run finishes, each
recovered round is exactly the survivors' sum, and epsilon is accounted with the parties summed.
With the default on_dropout=fail the CLI exits 1 naming the party."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import simulations.benchmarks.secagg_dropout  # noqa: F401  (registers pbm-audited, npq+secagg-audited)
import strategies  # noqa: F401
from simulations.cli.main import main
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.privacy import Accountant
from vfl.privacy.accounting.events import PBMEvent
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.transport.ray_transport import RayTransport

pytestmark = [pytest.mark.ray]
M = 4


def run_two_dropouts(monkeypatch, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """PBM over Ray, one party per actor, skip-party: party2 dies at train:0:3, party1 hangs at train:1:2;
    returns the result and what the audit hook read from the live actors (server sums, party inputs). No colluder
    declared (privacy.colluders: 0): the last two reach max(t, 2) = 2; undeclared (t - 1 = 1) they would refuse."""
    monkeypatch.setenv(FAULT_ENV, "party2@0:3,party1@1:2!hang")
    cfg = load_run_config({"strategy": "pbm-audited", "num_parties": M, "seed": 1, "params": params,
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 2, "batch_size": 25, "on_dropout": "skip-party"},
                           "transport": {"kind": "ray", "parties_per_actor": 1, "round_timeout_s": 4},
                           "privacy": {"colluders": 0}})
    seen: dict[str, Any] = {"inputs": {}}

    def audit(epoch: int, record: dict[str, Any], engine: Engine) -> None:  # while the actors live
        t = engine.transport
        seen["sums"] = t.call("server", 0, "audit_sums")
        for group in engine.grid.party_groups:
            for spec in next(g for g in engine.groups if g.name == group).specs:
                seen["inputs"].setdefault(spec.node_id, {}).update(t.call(group, spec.node_id, "audit_inputs"))

    transport = RayTransport()
    try:
        res = Engine(cfg, transport, BlobSource(num_parties=M, num_train=200), progress=False,
                     on_epoch_end=audit).run()
    finally:
        transport.shutdown()
    return res, seen


def test_skip_party_over_ray_recovers_a_dead_and_a_late_party(ray_local, monkeypatch) -> None:
    res, seen = run_two_dropouts(monkeypatch, {})
    s = res.summary
    assert s["transport"] == "ray" and s["epochs"] == 2
    died, late = s["dropouts"]
    assert (died["party"], died["epoch"], died["step"], died["cause"]) == ("party2", 0, 3, "died")
    assert died["contributed"] == ["party0", "party1", "party3"] and died["recovery_bytes"] > 0
    assert (late["party"], late["epoch"], late["step"], late["cause"]) == ("party1", 1, 2, "timeout")
    assert late["contributed"] == ["party0", "party3"]
    assert [r["parties_active"] for r in res.history] == [3, 2]
    for rnd, summed in (("train:0:3", [1, 2, 4]), ("train:1:2", [1, 4])):
        total, got = seen["sums"][rnd]
        assert got == summed
        truth = sum(np.asarray(seen["inputs"][p][rnd], dtype=np.int64) for p in summed)
        np.testing.assert_array_equal(np.asarray(total), truth % (1 << s["bits_per_element"]))
    acc = Accountant()
    for m in (3, 2):  # the fewest parties summed in each epoch
        acc.record(PBMEvent(b=16, beta=0.25, num_parties=m, dim=4, count=1))
    assert s["epsilon"] == pytest.approx(acc.epsilon(1e-5)[0])
    assert s["recovery_bytes"] == died["recovery_bytes"] + late["recovery_bytes"]


def test_fail_over_ray_exits_1_naming_the_party(ray_local, monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv(FAULT_ENV, "party3@0:1")
    code = main(["run", "demo", "--out", str(tmp_path / "run"), "--transport", "ray", "--no-progress",
                 "--set", "train.epochs=1", "--set", "data.train_subsample=300"])
    assert code == 1
    err = capsys.readouterr().err
    assert "party party3 failed in round train:0:1" in err
