"""Recorded views reach disk with every checkpoint, not only at the end: the tests over Ray actors."""

from __future__ import annotations

from collections import Counter

import pytest

import strategies  # noqa: F401
from tests.engine.runtime.test_views_with_checkpoints import N, _cfg, _train_epochs  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.views import load_views


@pytest.mark.ray
def test_a_restart_flags_what_live_hosts_received_in_the_aborted_attempt(tmp_path, ray_local):
    import threading

    from vfl.runtime.transport.ray_transport import RayTransport

    cfg = load_run_config({**_cfg().to_dict(), "train": {**_cfg().to_dict()["train"], "on_failure": "restart",
                                                          "max_restarts": 1, "batch_size": 8},
                           "transport": {"kind": "ray", "parties_per_actor": 1, "cpus_per_actor": 0.1}})
    transport = RayTransport()
    timers: list[threading.Timer] = []

    def on_step(epoch, done, engine):  # party1's host dies with a step of epoch 1 in flight
        if epoch == 1 and done >= 10 and not timers:
            timers.append(threading.Timer(0.02, transport.kill, args=("parties-1",)))
            timers[0].start()

    try:
        result = Engine(cfg, transport, BlobSource(num_parties=3, num_train=N), run_dir=RunDir(tmp_path),
                        progress=False, on_step=on_step).run()
    finally:
        for t in timers:
            t.join()
        transport.shutdown()
    assert timers and len(result.summary["restarts"]) == 1, (len(timers), result.summary.get("restarts"))
    views = load_views(tmp_path)
    replaced = Counter(e["epoch"] for v in views.values() for e in v.entries if e.get("replaced") == "restart")
    assert replaced and set(replaced) == {1}  # live hosts' entries of the aborted epoch 1, flagged
    assert _train_epochs(views["party0"]) == {0: N // 8, 1: N // 8, 2: N // 8}  # one attempt per epoch by default
