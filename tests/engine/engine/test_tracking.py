"""Tracking that loses nothing, without the optional extras: the tests through in-process engine runs."""

from __future__ import annotations

import csv

import vfl
from vfl.engine.tracking import CSV_FILE

TINY = {"params.b": 8, "data.train_subsample": 128, "data.test_subsample": 64, "train.epochs": 2}


def test_a_list_of_trackers_and_the_callbacks(tmp_path):
    out = tmp_path / "run"
    epochs, steps = [], []
    result = vfl.run("demo", out_dir=out, overrides={**TINY, "tracking": ["csv", "none"]},
                     on_epoch_end=lambda epoch, row, engine: epochs.append((epoch, row)),
                     on_step=lambda epoch, done, engine: steps.append((epoch, done)))
    assert [e for e, _ in epochs] == [0, 1] and [r for _, r in epochs] == result.history
    per_epoch = -(-128 // result.config.train.batch_size)
    for e in (0, 1):  # steps done so far in the epoch (a pipelined strategy may report several at once)
        done = [k for ep, k in steps if ep == e]
        assert done == sorted(done) and done[-1] == per_epoch
    with open(out / CSV_FILE) as f:
        assert [int(r["epoch"]) for r in csv.DictReader(f)] == [0, 1]
    assert vfl.resolve(out / "config.resolved.yaml").tracking == ("csv", "none")
