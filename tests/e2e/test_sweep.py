"""`vfl sweep`: every (setting, seed) is one normal run; the table is the mean ± std over seeds."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest
import yaml

from simulations.cli.main import main
from simulations.cli.sweep import (
    mean_std,
    parse_grid,
    print_table,
    split_values,
    table_rows,
    variance_note,
)

TINY = {"name": "tiny", "strategy": "npq", "dataset": "digits", "num_parties": 2,
        "data": {"train_subsample": 128, "test_subsample": 64},
        "train": {"epochs": 1, "batch_size": 64}, "transport": {"kind": "inprocess"}}


def test_sweep_writes_one_row_per_setting_with_mean_and_std(tmp_path, capsys):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "sweep"
    assert main(["sweep", str(cfg), "--set", "train.lr=0.01,0.2", "--seeds", "0,1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    with open(out / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["train.lr"] for r in rows] == ["0.01", "0.2"] and all(r["n"] == "2" for r in rows)
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    assert len(runs) == 4 and {r["seed"] for r in runs} == {0, 1}
    assert all(not Path(r["run_dir"]).is_absolute() and (out / r["run_dir"]).is_dir() for r in runs)
    for row in rows:
        accs = [json.loads((out / r["run_dir"] / "summary.json").read_text())["final_test_acc"]
                for r in runs if str(r["setting"]["train.lr"]) == row["train.lr"]]
        assert float(row["final_test_acc_mean"]) == pytest.approx(statistics.fmean(accs))
        assert float(row["final_test_acc_std"]) == pytest.approx(statistics.stdev(accs))
        cfg_used = yaml.safe_load((out / runs[0]["run_dir"] / "config.resolved.yaml").read_text())
        assert cfg_used["train"]["lr"] == 0.01 and cfg_used["seed"] == 0
    assert "final_test_acc" in printed and "±" in printed and "sweep.csv" in printed
    note = json.loads((out / "sweep.json").read_text())["variance"]  # what the ± is over, printed above the table
    assert f"±: {note}" in printed and "seeds 0,1" in note and "fresh in every run" in note
    assert f"sweep figure: {out / 'sweep.png'}" in printed and (out / "sweep.pdf").read_bytes().startswith(b"%PDF")


def test_the_default_table_adds_the_strategys_own_results_the_runs_have(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "secureboost-bc", "--transport", "inprocess", "--set", "params.n_estimators=2",
                 "--set", "params.max_depth=2,3", "--set", "params.he=none", "--set", "params.allow_insecure=true",
                 "--out", str(out)]) == 0
    (row, _) = json.loads((out / "sweep.json").read_text())["table"]
    assert {"final_test_auc_mean", "n_trees_mean", "final_test_acc_mean"} <= set(row)
    assert "final_test_rmse_mean" not in row  # a classifier's runs have none: not a column of dashes


def test_a_bad_value_anywhere_in_the_grid_fails_before_any_run(tmp_path, capsys):
    out = tmp_path / "sweep"
    code = main(["sweep", "demo", "--set", "train.lr=0.1,-1", "--seeds", "0", "--out", str(out)])
    assert code == 2 and "train.lr" in capsys.readouterr().err and not out.exists()
    assert main(["sweep", "demo", "--seeds", "a,b"]) == 2
    assert main(["sweep", "demo", "--set", "train.lr"]) == 2


def test_grid_parsing_keeps_bracketed_values_whole():
    assert split_values("1, 2,[3,4],{a: 1, b: 2}") == ["1", "2", "[3,4]", "{a: 1, b: 2}"]
    assert parse_grid(["a=1,2", "b.c=x"]) == [("a", ["1", "2"]), ("b.c", ["x"])]
    assert mean_std([1.0]) == (1.0, None) and mean_std([]) == (None, None)  # one seed: no spread, not 0
    assert mean_std([1.0, 3.0]) == (2.0, pytest.approx(2 ** 0.5))


def test_a_single_seed_prints_no_spread(capsys):
    """One seed per setting: the mean alone (was 'mean ± 0', a spread nobody measured); the CSV's std
    cell stays empty. Two seeds: mean ± sample std."""
    one = [{"setting": {"b": 8}, "seed": 0, "summary": {"acc": 0.9}}]
    two = [*one, {"setting": {"b": 8}, "seed": 1, "summary": {"acc": 0.7}}]
    print_table(table_rows(one, ["b"], ["acc"]), ["b"], ["acc"])
    single = capsys.readouterr().out
    assert "0.9" in single and "±" not in single
    assert table_rows(one, ["b"], ["acc"])[0]["acc_std"] is None
    print_table(table_rows(two, ["b"], ["acc"]), ["b"], ["acc"])
    assert "0.8 ± 0.14" in capsys.readouterr().out


def test_the_sweep_says_which_variance_its_table_shows():
    """--seeds 0,1 reads as "repeatable" to an HF/Flower user: the note says a seed does not repeat the
    privacy noise (crypto), or, with privacy.noise_rng: seeded, that it does and the runs are not private."""
    crypto = variance_note([0, 1, 2], {"crypto"})
    assert crypto.startswith("mean ± sample std over seeds 0,1,2") and "no seed repeats a run" in crypto
    assert "privacy.noise_rng=seeded" in crypto  # the way to repeat it
    seeded = variance_note([0, 1], {"seeded"})
    assert "a seed repeats its run" in seeded and "NOT private" in seeded
    assert "NOT private" in variance_note([0, 1], {"seeded", "crypto"})
    assert variance_note([3], {"crypto"}).startswith("one seed (3) per setting: no spread")

