"""One sweep per --out directory: a second sweep (or a second --resume) into a directory another
sweep holds is refused in one line naming the holder's PID, before it writes anything; before,
both ran and one table overwrote the other."""

from __future__ import annotations

import os

from simulations.cli.main import main
from vfl.engine.lock import RunLock

TINY = ["--transport", "inprocess", "--set", "params.b=8", "--set", "data.train_subsample=128",
        "--set", "data.test_subsample=64", "--set", "train.epochs=1", "--seeds", "0"]


def test_a_sweep_into_a_directory_another_sweep_holds_is_refused(tmp_path, capsys):
    out = tmp_path / "sweep"
    out.mkdir()
    with RunLock(out, key="--out"):  # another sweep is running there
        for extra in ([], ["--resume"]):
            assert main(["sweep", "demo", *TINY, "--out", str(out), *extra]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "in use by another vfl run" in err[0] and str(os.getpid()) in err[0]
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing written


def test_the_control_a_free_directory_sweeps_and_resumes(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "demo", *TINY, "--out", str(out)]) == 0
    assert (out / "sweep.csv").is_file()
    assert main(["sweep", "demo", *TINY, "--out", str(out), "--resume"]) == 0  # its own lock file is no obstacle
    assert main(["sweep", "demo", *TINY, "--out", str(out)]) == 2  # not empty, no --resume: refused as before
