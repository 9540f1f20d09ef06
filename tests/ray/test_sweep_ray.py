"""`vfl sweep --parallel N`: the grid's runs as Ray tasks give the same table as one after another."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from simulations.cli.main import main
from simulations.cli.sweep_ray import check_parallel
from vfl.core.errors import ConfigError

TINY = {"name": "tiny", "strategy": "npq", "dataset": "digits", "num_parties": 2,
        "data": {"train_subsample": 128, "test_subsample": 64},
        "train": {"epochs": 1, "batch_size": 64}, "transport": {"kind": "inprocess"}}
GRID = ["--set", "train.lr=0.01,0.2", "--seeds", "0,1"]


def _table(out):
    with open(out / "sweep.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.ray
def test_a_2x2_grid_as_ray_tasks_matches_the_sequential_table(ray_local, tmp_path, capsys):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    seq, par = tmp_path / "seq", tmp_path / "par"
    assert main(["sweep", str(cfg), *GRID, "--out", str(seq)]) == 0
    assert main(["sweep", str(cfg), *GRID, "--out", str(par), "--parallel", "2", "--cpus-per-task", "1"]) == 0
    out = capsys.readouterr().out
    assert "final_test_acc" in out
    done_par = [ln for ln in out.splitlines() if ln.startswith("run ") and f"-> {par}" in ln]
    assert sorted(ln.split(" done:")[0] for ln in done_par) == [f"run {k}/4" for k in range(1, 5)]  # as each ends
    rows_par, rows_seq = _table(par), _table(seq)
    assert [(r["train.lr"], r["n"], r["total_bytes_up_mean"]) for r in rows_par] == \
           [(r["train.lr"], r["n"], r["total_bytes_up_mean"]) for r in rows_seq]
    for p, s in zip(rows_par, rows_seq, strict=True):  # same seeds, same runs (up to torch's thread count)
        for m in ("final_test_acc_mean", "final_test_acc_std", "final_train_loss_mean"):
            assert float(p[m]) == pytest.approx(float(s[m]), rel=1e-4, abs=1e-6)
    runs = json.loads((par / "sweep.json").read_text())["runs"]
    assert len(runs) == 4 and [r["run_dir"] for r in runs] == [r["run_dir"].replace(str(seq), str(par)) for r in
                                                               json.loads((seq / "sweep.json").read_text())["runs"]]
    assert all((par / r["run_dir"] / "summary.json").is_file() for r in runs)  # run_dir is relative to the sweep
    assert ray_local.is_initialized()  # a Ray the sweep did not start is left running


@pytest.mark.ray
def test_a_failing_run_in_a_parallel_sweep_is_one_line(ray_local, tmp_path, capsys):
    code = main(["sweep", "demo", "--set", "model.bottom=tests.support.byo_models:explodes", "--seeds", "0,1",
                 "--set", "num_parties=2", "--set", "transport.kind=inprocess",
                 "--out", str(tmp_path / "sw"), "--parallel", "2"])
    assert code != 0 and "out of weights" in capsys.readouterr().err
    code = main(["sweep", "demo", "--seeds", "0,1", "--out", str(tmp_path / "gpu"), "--parallel", "2",
                 "--gpus-per-task", "1"])
    assert code == 2 and "--gpus-per-task: got 1 but the Ray cluster has GPU=0" in capsys.readouterr().err


def test_parallel_flags_are_checked():
    check_parallel(parallel=1, cpus_per_task=1.0, transport="ray")
    for kw, key in (({"parallel": 0}, "--parallel"), ({"cpus_per_task": 0.0}, "--cpus-per-task"),
                    ({"parallel": 2, "transport": "ray"}, "--transport"), ({"gpus_per_task": -1}, "--gpus-per-task")):
        with pytest.raises(ConfigError) as err:
            check_parallel(**{"parallel": 1, "cpus_per_task": 1.0, "transport": None, **kw})
        assert err.value.key == key
