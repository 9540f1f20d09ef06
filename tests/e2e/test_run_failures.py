"""Failures during a run end in one line: disk full names the file and the checkpoint to resume
from; a spent privacy budget stops the run without suggesting to resume it."""

from __future__ import annotations

import os

from simulations.cli.main import main

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
    """The budget is checked BEFORE the epoch that would exceed it; the stopped run keeps its summary and plots."""
    import json

    import vfl

    eps = [vfl.account(mechanism="pbm", b=8, beta=0.25, parties=4, alpha=2.0, epochs=e, dim=16, delta=1e-5)["epsilon"]
           for e in (1, 2)]
    budget = (eps[0] + eps[1]) / 2
    out = tmp_path / "run"
    code = main(["run", "demo", "--out", str(out), *SMALL, "--set", "train.epochs=3",
                 "--set", f"privacy.epsilon_budget={budget}"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("vfl: run stopped: epoch 1 would take epsilon to ") and "stopped before it" in err
    assert "resume" not in err and "cannot go on" in err and str(out) in err
    s = json.loads((out / "summary.json").read_text())
    assert s["epochs"] == 1 and s["stopped"]["before_epoch"] == 1 and s["stopped"]["reason"] == "epsilon_budget"
    assert s["epsilon"] <= budget < s["stopped"]["predicted_epsilon"]
    assert abs(s["epsilon"] - eps[0]) <= 1e-9 * eps[0] and abs(s["stopped"]["predicted_epsilon"] - eps[1]) <= 1e-9 * eps[1]
    assert (out / "plots" / "accuracy.png").is_file() and len((out / "metrics.jsonl").read_text().splitlines()) == 1


def test_a_budget_below_one_epoch_runs_nothing_but_still_reports(tmp_path):
    import vfl

    result = vfl.run("demo", out_dir=tmp_path / "run", overrides=["params.b=8", "data.train_subsample=128",
                                                                  "privacy.epsilon_budget=0.001"])
    assert result.history == [] and result.summary["epochs"] == 0 and result.stopped["before_epoch"] == 0
    assert (tmp_path / "run" / "summary.json").is_file()
