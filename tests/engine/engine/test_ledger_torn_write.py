"""Issue 47, item 1, as the issue ran it: a 2-epoch run, torn bytes appended to its privacy ledger, a resume
to 3 epochs and one to 4. Before, the first resume glued its release onto the torn bytes and the second
failed forever ("line 3 is not a privacy ledger record"). The control: the same steps without the fault."""

from __future__ import annotations

import dataclasses

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.privacy.accounting.wal import LEDGER_FILE, ReleaseLedger
from vfl.runtime.transport.inprocess import InProcessTransport

SOURCE = BlobSource(num_parties=3, num_train=64, num_test=16)
TORN = b'{"record": "release", "seq": 3, "epo'


def _run(path, epochs, *, resume, warned):
    cfg = load_run_config({"num_parties": 3, "seed": 1, "strategy": "pbm", "params": {"b": 8},
                           "train": {"epochs": epochs, "batch_size": 32}, "privacy": {"noise_rng": "seeded"}})
    run_dir = RunDir(path)
    run_dir.checkpoints.warn = warned.append
    run_dir.write_config(cfg.to_dict())
    return Engine(cfg, InProcessTransport(), dataclasses.replace(SOURCE), run_dir=run_dir,
                  progress=False).run(resume=resume)


@pytest.mark.parametrize("torn", [True, False], ids=["torn", "control"])
def test_resumes_after_a_torn_ledger_write(tmp_path, torn):
    path, warned = tmp_path / "run", []
    _run(path, 2, resume=False, warned=warned)
    if torn:
        with open(path / LEDGER_FILE, "ab") as f:
            f.write(TORN)
    _run(path, 3, resume=True, warned=warned)
    result = _run(path, 4, resume=True, warned=warned)  # before: RunDirError, and on every try after
    assert [r["epoch"] for r in result.history] == [0, 1, 2, 3]
    ledger = ReleaseLedger(path / LEDGER_FILE)
    assert [r.epoch for r in ledger.releases()] == [0, 1, 2, 3]
    assert result.summary["privacy_ledger_head"] == ledger.head
    assert [w for w in warned if LEDGER_FILE in w] == ([f"{path / LEDGER_FILE} held {len(TORN)} byte(s) of a record "
                                                        "whose write did not complete (never sent); cut and kept in "
                                                        f"{next(path.glob(LEDGER_FILE + '.torn-*')).name}"]
                                                       if torn else [])
