"""``vfl run secureboost-bc``: tree progress lines, the summary's keys, and one line for each bad input."""

from __future__ import annotations

import json

import pytest

from simulations.cli.main import main

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_the_bundled_config_prints_a_line_per_tree_and_the_trees_results(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "secureboost-bc", "--transport", "inprocess", "--set", "params.n_estimators=2",
                 "--set", "params.max_depth=3", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split()[:2] for ln in lines[:2]] == [["tree", "1/2"], ["tree", "2/2"]]
    assert "test_auc" in lines[1] and "MB" in lines[1]
    final = json.loads(lines[2])
    assert final["n_trees"] == 2 and final["he"] == "paillier" and final["key_bits"] == 2048
    summary = json.loads((out / "summary.json").read_text())
    for key in ("final_test_auc", "final_test_acc", "n_trees", "s_per_tree"):
        assert summary[key] is not None, key
    assert summary["final_test_auc"] > 0.9
    assert (out / "plots").is_dir() and (out / "checkpoints").is_dir()
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--set", "params.n_estimators=3"]) == 0  # one more tree
    assert capsys.readouterr().out.splitlines()[0].split()[:2] == ["tree", "3/3"]
    assert json.loads((out / "summary.json").read_text())["n_trees"] == 3
    assert main(["run", "--resume", str(out), "--set", "params.n_estimators=2"]) != 0  # fewer: refused
    assert "params.n_estimators" in capsys.readouterr().err
    assert main(["report", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    owners = report["gain_importance"]
    assert sum(o["splits"] for o in owners.values()) > 0 and "Gain importance" in (out / "report.md").read_text()
    assert all(set(o) == {"gain", "splits", "by_feature"} for o in owners.values())  # no threshold anywhere


def test_per_party_files_through_psi_with_the_label_holders_own_columns(tmp_path, capsys):
    pytest.importorskip("private_set_intersection")
    out = tmp_path / "run"
    assert main(["run", "secureboost-bc", "--transport", "inprocess", "--set", "params.n_estimators=2",
                 "--set", "params.max_depth=3", "--set", "params.he=none", "--set", "params.allow_insecure=true",
                 "--set", f"data.split_parties.dir={tmp_path / 'files'}", "--set", "privacy.record_views=true",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["psi_intersection_size"] > 0 and summary["final_test_auc"] > 0.9
    assert "label_holder" in summary["gain_importance"]  # its columns: data.parties[0], read where the labels are
    assert main(["report", str(out), "--attacks", "instance_space,feature_order", "--no-progress"]) == 0
    attacks = {a["name"]: a for a in json.loads((out / "report.json").read_text())["attacks"]}  # the aligned rows
    assert attacks["instance_space"]["value"] > attacks["instance_space"]["baseline"]
    assert attacks["feature_order"]["value"] > 0.3


@pytest.mark.parametrize("overrides,needle", [
    (["params.key_bits=1024"], "params.key_bits"),
    (["params.he=none"], "allow_insecure"),
    (["dataset=wine"], "binary:logistic"),
    (["dataset=diabetes", "num_parties=2"], "reg:squarederror"),
    (["train.epochs=3", "params.n_estimators=5"], "params.n_estimators"),
])
def test_bad_input_is_one_line(overrides, needle, capsys):
    args = ["run", "secureboost-bc", "--dry-run", "--transport", "inprocess"]
    for o in overrides:
        args += ["--set", o]
    assert main(args) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_config_help_lists_xgboosts_names(capsys):
    assert main(["config-help", "--strategy", "secureboost"]) == 0
    text = capsys.readouterr().out
    for key in ("n_estimators", "max_depth", "learning_rate", "reg_lambda", "gamma", "min_child_weight", "max_bin",
                "base_score", "objective", "params.he", "allow_insecure", "key_bits"):
        assert key in text, key
