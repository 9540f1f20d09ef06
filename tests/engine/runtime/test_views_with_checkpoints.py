"""Recorded views reach disk with every checkpoint, not only at the end: a killed run keeps the
views of its committed epochs, and the entries of an aborted attempt (redone after a restart or a
resume) are kept but flagged ``replaced``, so a view reader sees one attempt per epoch by default."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
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


