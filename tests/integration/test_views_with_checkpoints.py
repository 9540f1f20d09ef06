"""Recorded views reach disk with every checkpoint, not only at the end: a killed run keeps the
views of its committed epochs, and the entries of an aborted attempt (redone after a restart or a
resume) are kept but flagged ``replaced``, so a view reader sees one attempt per epoch by default."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import strategies  # noqa: F401
from tests.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.runtime.views import load_views

N, B = 200, 50
STEPS = N // B


class Killed(Exception):
    pass


def _cfg(**train):
    return load_run_config({"strategy": "npq", "num_parties": 3, "seed": 1, "privacy": {"record_views": True},
                            "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 3, "batch_size": B, **train}})


def _engine(run_dir, **kw):
    return Engine(_cfg(**kw.pop("train", {})), InProcessTransport(), BlobSource(num_parties=3, num_train=N),
                  run_dir=run_dir, progress=False, **kw)


def _train_epochs(view, **select):
    return Counter(e["epoch"] for e, _ in view.select(record="grad", phase="train", **select))


def test_a_killed_run_keeps_the_views_of_its_committed_epochs(tmp_path):
    def kill(epoch, record, engine):
        if epoch == 1:
            raise Killed()

    run_dir = RunDir(tmp_path)
    with pytest.raises(Killed):
        _engine(run_dir, on_epoch_end=kill).run()
    assert _train_epochs(load_views(tmp_path)["party0"]) == {0: STEPS, 1: STEPS}  # was: no views/ at all
    _engine(run_dir).run(resume=True)
    assert _train_epochs(load_views(tmp_path)["party0"]) == {0: STEPS, 1: STEPS, 2: STEPS}


def test_a_kill_between_views_and_checkpoint_flags_the_aborted_attempt_on_resume(tmp_path, monkeypatch):
    run_dir = RunDir(tmp_path)
    save = run_dir.save_checkpoint

    def dies_at_epoch_1(epoch, *args, **kwargs):
        if epoch == 1:
            raise Killed()
        return save(epoch, *args, **kwargs)

    monkeypatch.setattr(run_dir, "save_checkpoint", dies_at_epoch_1)
    with pytest.raises(Killed):
        _engine(run_dir).run()
    monkeypatch.undo()
    _engine(RunDir(tmp_path)).run(resume=True)
    party = load_views(tmp_path)["party0"]
    assert _train_epochs(party) == {0: STEPS, 1: STEPS, 2: STEPS}  # one attempt per epoch by default
    flagged = [e for e in party.entries if e.get("replaced")]
    assert flagged and {e["epoch"] for e in flagged} == {1} and {e["replaced"] for e in flagged} == {"resume"}
    assert _train_epochs(party, replaced=True)[1] == 2 * STEPS  # both attempts were received: both kept
    index = json.loads((tmp_path / "views" / "index.json").read_text())
    assert index["aborted_attempts"][0]["reason"] == "resume" and index["aborted_attempts"][0]["after_epoch"] == 0


@pytest.mark.ray
@pytest.mark.slow
def test_a_restart_flags_what_live_hosts_received_in_the_aborted_attempt(tmp_path, ray_local):
    import threading

    from vfl.runtime.transport.ray_transport import RayTransport

    cfg = load_run_config({**_cfg().to_dict(), "train": {**_cfg().to_dict()["train"], "on_failure": "restart",
                                                          "max_restarts": 1, "batch_size": 8},
                           "transport": {"kind": "ray", "parties_per_actor": 1, "cpus_per_actor": 0.1,
                                         "compiled_graph": "off"}})
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
