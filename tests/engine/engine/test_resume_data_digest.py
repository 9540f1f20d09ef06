"""A resume binds each node to the data of its checkpoint: a party whose features changed, rows were
removed, or a label holder whose labels changed between the kill and the resume refuses to train,
with one line naming the node (a digest computed inside the node; no ID or value leaves it).
Before, the resume re-matched IDs and kept training the old models on other data, exit 0."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import strategies  # noqa: F401
from parties.vertical.data_guard import DataGuard, digest
from simulations.data.split_parties import ID, LABEL
from tests.support.helpers import BlobSource
from tests.support.party_data import source, write_blob_parties
from vfl.core.errors import DataError
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

M = 3


class Killed(Exception):
    pass


def _cfg():
    return load_run_config({"strategy": "npq", "num_parties": M, "seed": 5, "privacy": {"noise_rng": "seeded"},
                            "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 2, "batch_size": 40, "lr": 0.05},
                            "transport": {"parties_per_actor": 1}})


def _cut(tmp_path, data):
    """Train epoch 0, checkpoint it, die: a run directory to resume."""
    def kill(epoch, record, engine):
        raise Killed()

    run_dir = RunDir(tmp_path / "cut")
    run_dir.write_config(_cfg().to_dict())
    with pytest.raises(Killed):
        Engine(_cfg(), InProcessTransport(), data, run_dir=run_dir, progress=False, on_epoch_end=kill).run()
    return run_dir


def _resume(run_dir, data):
    return Engine(_cfg(), InProcessTransport(), data, run_dir=run_dir, progress=False).run(resume=True)


def _edit_csv(path, fn):
    frame = pd.read_csv(path, dtype={ID: str})
    fn(frame)
    frame.to_csv(path, index=False)


@pytest.mark.parametrize("change, who", [
    ("negate_party1_features", "party1: its data changed since the checkpoint"),
    ("flip_labels", "server: its data changed since the checkpoint"),
    ("drop_40pct_of_party0_rows", r"PSI: the common sample IDs \(\d+\) differ from the checkpoint's"),
])
def test_a_resume_on_changed_per_party_files_is_refused_naming_the_node(tmp_path, change, who):
    files = tmp_path / "files"
    data, _ = write_blob_parties(files, num_parties=M, overlap=0.7)
    run_dir = _cut(tmp_path, data)
    if change == "negate_party1_features":
        def negate(f):
            cols = [c for c in f.columns if c != ID]
            f[cols] = -f[cols]
        _edit_csv(files / "party1.csv", negate)
    elif change == "drop_40pct_of_party0_rows":
        frame = pd.read_csv(files / "party0.csv", dtype={ID: str})
        frame.iloc[: int(0.6 * len(frame))].to_csv(files / "party0.csv", index=False)
    else:
        def flip(f):
            f[LABEL] = (f[LABEL] + 1) % 3
        _edit_csv(files / "labels.csv", flip)
    with pytest.raises(DataError, match=rf"^{who}") as info:
        _resume(run_dir, source(files, M))
    assert "\n" not in str(info.value)


def test_the_control_unchanged_files_resume(tmp_path):
    files = tmp_path / "files"
    data, _ = write_blob_parties(files, num_parties=M, overlap=0.7)
    run_dir = _cut(tmp_path, data)
    assert len(_resume(run_dir, source(files, M)).history) == 2


def test_a_resume_on_other_in_memory_data_is_refused(tmp_path):
    run_dir = _cut(tmp_path, BlobSource(num_parties=M, seed=0))
    with pytest.raises(DataError, match=r"its data changed since the checkpoint"):
        _resume(run_dir, BlobSource(num_parties=M, seed=1))


def test_the_digest_sees_values_shape_and_dtype():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert digest([a]) == digest([a.copy()])
    assert digest([a]) != digest([-a])
    assert digest([a]) != digest([a.reshape(4, 3)])
    assert digest([a]) != digest([a.astype(np.float64)])
    assert digest([a]) != digest([a[:2]])
    guard = DataGuard("party0")
    guard.expect(digest([a]))
    guard.check([a])  # same data: passes, and is checked once
    assert guard.expected is None
    guard.expect(None)  # a checkpoint from before digests: nothing to compare
    guard.check([-a])
