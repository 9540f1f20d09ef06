"""A run you can watch from a log: epoch lines off a terminal, ``run k/N`` in sweeps, a summary.json
whose ``wall_s`` is the whole run, with the seed and the calibrated noise; Ray's session files
stay out of the run directory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

import vfl

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
TINY = {"params.b": 8, "data.train_subsample": 256, "data.test_subsample": 64, "train.epochs": 3}
LINE = re.compile(r"^ *epoch (\d+)/(\d+) loss [0-9.]+ acc [0-9.]+ (ε [0-9.e+-]+ )?MB [0-9.]+ [0-9.]+s$")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as under nohup/SLURM/CI: stdout is a pipe, not a terminal."""
    return subprocess.run([sys.executable, "-m", "simulations.cli.main", *args], env=ENV, text=True,
                          capture_output=True, timeout=600)


def test_a_piped_run_prints_one_line_per_epoch_and_times_the_whole_run(tmp_path):
    out = tmp_path / "run"
    sets = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    launched = time.time()
    done = _cli("run", "demo", "--transport", "inprocess", "--out", str(out), "--set", "seed=7", *sets)
    assert done.returncode == 0, done.stderr
    age = (out / "summary.json").stat().st_mtime - launched  # the process's age when it wrote its summary
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("epoch ")]
    assert [LINE.match(ln).group(1, 2) for ln in lines] == [("1", "3"), ("2", "3"), ("3", "3")], done.stdout
    assert not any(ln.startswith("epoch ") for ln in done.stderr.splitlines())  # stderr: errors only
    assert all("ε " in ln for ln in lines)  # pbm is accounted
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(r) for r in (out / "metrics.jsonl").read_text().splitlines()]
    assert summary["train_wall_s"] == rows[-1]["wall_s"]  # the training clock keeps its own name
    assert summary["wall_s"] > summary["train_wall_s"]  # the whole run: data, keys, evaluation, checkpoints
    assert age - 1.0 < summary["wall_s"] <= age + 0.05  # from process start: interpreter and imports counted
    assert summary["seed"] == 7 and "calibrated" not in summary


def test_target_epsilon_records_the_calibrated_option():
    pbm = vfl.run("demo", overrides={**TINY, "train.epochs": 1, "privacy.target_epsilon": 8.0})
    assert pbm.summary["target_epsilon"] == 8.0
    assert pbm.summary["calibrated"] == {"params.beta": pbm.config.params.beta}
    assert pbm.config.params.beta < 0.25  # the demo's 0.25 was replaced by the calibration
    ldp = vfl.run("demo", overrides={**TINY, "train.epochs": 1, "strategy": "ldp", "privacy.target_epsilon": 8.0})
    assert ldp.summary["calibrated"] == {"params.sigma": ldp.config.params.sigma}


def test_a_piped_sweep_announces_each_run_and_switches_strategy_without_params_reset(tmp_path):
    out = tmp_path / "sweep"
    small = {k: v for k, v in TINY.items() if not k.startswith("params.")}  # a params.b override is kept (npq: error)
    sets = [a for k, v in {**small, "train.epochs": 2}.items() for a in ("--set", f"{k}={v}")]
    # the demo's params (b: 16, beta, secagg) are pbm's: npq accepts none, ldp accepts b and beta
    done = _cli("sweep", "demo", "--transport", "inprocess", "--out", str(out), "--set", "strategy=npq,ldp", *sets)
    assert done.returncode == 0, done.stderr
    announced = [ln for ln in done.stdout.splitlines() if re.match(r"^run \d+/\d+: ", ln)]
    assert [ln.split(":")[0] for ln in announced] == ["run 1/2", "run 2/2"]
    assert "strategy=npq" in announced[0] and "strategy=ldp" in announced[1]
    assert len([ln for ln in done.stdout.splitlines() if ln.startswith("  epoch ")]) == 4
    assert re.search(r"^run 2/2 done: final_test_acc ", done.stdout, re.M)
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    params = [yaml.safe_load((out / r["run_dir"] / "config.resolved.yaml").read_text())["params"] for r in runs]
    assert params[0] == {} and params[1]["b"] == 16 and params[1]["beta"] == 0.25


def test_a_sweep_resumes_keeping_finished_runs(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump({"name": "tiny", "strategy": "npq", "dataset": "digits", "num_parties": 2,
                                   "data": {"train_subsample": 128, "test_subsample": 64},
                                   "train": {"epochs": 2, "batch_size": 64}}))
    out = tmp_path / "sweep"
    args = ["sweep", str(cfg), "--transport", "inprocess", "--seeds", "0,1,2", "--out", str(out)]
    assert _cli(*args).returncode == 0
    table = (out / "sweep.csv").read_text()
    runs = [out / r["run_dir"] for r in json.loads((out / "sweep.json").read_text())["runs"]]  # relative to out
    kept_mtime = (runs[0] / "summary.json").stat().st_mtime_ns
    (runs[1] / "summary.json").unlink()  # killed after its last checkpoint, before the summary
    for p in sorted(runs[2].rglob("*"), reverse=True):  # never started
        p.unlink() if p.is_file() else p.rmdir()
    runs[2].rmdir()
    for name in ("sweep.csv", "sweep.json"):
        (out / name).unlink()
    refused = _cli(*args)  # without --resume a used directory is refused, naming the flag
    assert refused.returncode == 2 and "--resume" in refused.stderr
    done = _cli(*args, "--resume")
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("run ")]
    assert "finished before, kept" in lines[0] and lines[0].startswith("run 1/3")
    assert lines[1].startswith("run 2/3") and lines[1].endswith("(resumed)")
    assert any(ln.startswith("run 3/3: ") for ln in lines)
    assert (runs[0] / "summary.json").stat().st_mtime_ns == kept_mtime  # not run again
    assert (out / "sweep.csv").read_text() == table.replace(
        _col(table, "wall_s"), _col((out / "sweep.csv").read_text(), "wall_s"))  # same results (npq: no noise)


def _col(table: str, name: str) -> str:
    """The wall_s mean and std cells of a one-row sweep.csv (timings differ between runs)."""
    head, row = table.splitlines()[:2]
    cells = dict(zip(head.split(","), row.split(","), strict=True))
    return f"{cells[name + '_mean']},{cells[name + '_std']}"
