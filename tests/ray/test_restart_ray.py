"""Self-healing over Ray: an actor killed while a step is in flight is restarted from the last
checkpoint (SecAgg re-keyed) and the finished run equals an uninterrupted one (seeded noise)."""

from __future__ import annotations

import json
import threading
from dataclasses import replace

import pytest

import strategies  # noqa: F401
from simulations.cli.main import main
from tests.support.helpers import BlobSource
from vfl.core.errors import PartyFailure
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.runtime.transport.ray_transport import RayTransport

pytestmark = pytest.mark.ray
SOURCE = BlobSource(num_parties=3, num_train=240, num_test=60)
KEYS = ("train_loss", "train_acc", "test_acc", "bytes_up", "bytes_down", "cum_bytes_up", "cum_bytes_down",
        "eval_bytes_up", "epsilon")


def _cfg(**train):
    return load_run_config({
        "num_parties": 3, "seed": 2, "strategy": "pbm", "params": {"b": 8, "secagg": True},
        "train": {"epochs": 2, "batch_size": 8, "lr": 0.05, **train},  # 30 steps: a sync point at 16
        "transport": {"kind": "ray", "parties_per_actor": 1, "cpus_per_actor": 0.1},
        "privacy": {"noise_rng": "seeded"}})


def _run(kills: dict[tuple[int, int], str], **train):
    """Run; at (epoch, steps done) kill the named host actor a moment later, while the driver has
    already chained the next steps (so the actor dies with a step in flight)."""
    transport = RayTransport()
    fired: list[threading.Timer] = []

    def on_step(epoch, done, engine):
        group = kills.pop((epoch, done), None)
        if group is not None:
            t = threading.Timer(0.02, transport.kill, args=(group,))
            t.start()
            fired.append(t)

    try:
        return Engine(_cfg(**train), transport, SOURCE, progress=False, on_step=on_step).run()
    finally:
        for t in fired:
            t.join()
        transport.shutdown()


@pytest.fixture(scope="module")
def reference():
    """The run without a kill, in-process: a Ray run trains the same bits (tests/ray/test_all_strategies.py)."""
    cfg = _cfg()
    return Engine(replace(cfg, transport=replace(cfg.transport, kind="inprocess")), InProcessTransport(), SOURCE,
                  progress=False).run()


def _same(reference, result):
    assert [r["epoch"] for r in result.history] == [0, 1]
    for a, b in zip(reference.history, result.history, strict=True):
        for k in KEYS:
            assert a[k] == b[k], (a["epoch"], k, a[k], b[k])
    for k in ("total_bytes_up", "total_bytes_down", "setup_bytes", "final_test_acc", "epsilon"):
        assert reference.summary[k] == result.summary[k], k


def test_party_killed_mid_epoch_restarts_and_the_run_is_identical(reference):
    result = _run({(1, 16): "parties-1"})
    _same(reference, result)
    (restart,) = result.summary["restarts"]
    assert restart["party"] == "party1" and restart["epoch"] == 1 and "died" in restart["cause"]
    assert restart["round"] and restart["attempt"] == 1
    assert result.summary["replay_bytes"] > 0 and reference.summary["replay_bytes"] == 0
    assert reference.summary["restarts"] == [] and result.summary["on_failure"] == "restart"
    assert reference.summary["transport"] == "inprocess" and result.summary["transport"] == "ray"


def test_server_killed_before_the_first_checkpoint_restarts_from_the_start(reference):
    result = _run({(0, 16): "server"})
    _same(reference, result)
    assert [(r["party"], r["epoch"]) for r in result.summary["restarts"]] == [("server", 0)]


def test_restarts_are_bounded_and_fail_mode_fails(ray_local):
    with pytest.raises(PartyFailure, match=r"gave up after 1 restart\(s\) \(train.max_restarts=1\)") as exc:
        _run({(0, 16): "parties-0", (1, 16): "parties-2"}, max_restarts=1)
    assert exc.value.party == "party2"
    with pytest.raises(PartyFailure) as exc:
        _run({(0, 16): "parties-0"}, on_failure="fail")
    assert exc.value.party == "party0" and "gave up" not in str(exc.value)


def test_resume_honours_transport_flag(ray_local, tmp_path, capsys):
    out = tmp_path / "run"
    fast = ["--no-progress", "--set", "params.b=8", "--set", "data.train_subsample=256",
            "--set", "data.test_subsample=64"]
    assert main(["run", "demo", "--out", str(out), "--set", "train.epochs=1", *fast]) == 0
    assert json.loads((out / "summary.json").read_text())["transport"] == "ray"
    assert main(["run", "--resume", str(out), "--transport", "inprocess", "--set", "train.epochs=2",
                 "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["transport"] == "inprocess" and summary["epochs"] == 2
    assert "transport.kind='inprocess'" in (out / "config.resolved.yaml").read_text()
