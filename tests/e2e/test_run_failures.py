"""Failures during a run end in one line: disk full names the file and the checkpoint to resume
from; a spent privacy budget stops the run without suggesting to resume it."""

from __future__ import annotations

import os

from simulations.cli import main

SMALL = ["--transport", "inprocess", "--no-progress", "--set", "params.b=8", "--set", "data.train_subsample=256",
         "--set", "data.test_subsample=64"]


def test_disk_full_mid_run_names_the_file_and_the_last_checkpoint(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    real = os.fsync
    calls = {"n": 0}

    def fsync(fd):
        if "epoch_00001" in os.readlink(f"/proc/self/fd/{fd}"):
            calls["n"] += 1
            raise OSError(28, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    assert main(["run", "demo", "--out", str(out), *SMALL, "--set", "train.epochs=3"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("vfl: run failed: cannot write ") and "No space left on device" in err
    assert err.endswith(f"last checkpoint: epoch_00000; resume with: vfl run --resume {out}"), err
    assert calls["n"] == 1 and not list((out / "checkpoints").glob(".tmp_*"))
    monkeypatch.undo()
    assert main(["run", "--resume", str(out), "--no-progress"]) == 0  # space again: it goes on


def test_privacy_budget_stop_does_not_suggest_resuming(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "demo", "--out", str(out), *SMALL, "--set", "train.epochs=3",
                 "--set", "privacy.epsilon_budget=0.001"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("vfl: run stopped: epsilon ") and "privacy.epsilon_budget 0.001 after epoch 0" in err
    assert "resume" not in err and "cannot go on" in err and str(out) in err
