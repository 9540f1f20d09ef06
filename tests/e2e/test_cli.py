"""CLI end to end: `vfl run` writes its files with the promised keys; bad input exits 2 naming the key."""

from __future__ import annotations

import json

import pytest
import yaml

from simulations.cli.main import main

FAST = ["--transport", "inprocess", "--no-progress", "--set", "train.epochs=2", "--set", "params.b=8"]


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_run_writes_config_metrics_summary_plots_checkpoints(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "demo", "--out", str(out), *FAST]) == 0
    cfg = yaml.safe_load((out / "config.resolved.yaml").read_text())
    assert cfg["strategy"] == "pbm" and cfg["train"]["epochs"] == 2 and cfg["params"]["b"] == 8
    lines = _lines(out / "metrics.jsonl")
    assert [r["epoch"] for r in lines] == [0, 1]
    for r in lines:
        for key in ("epoch", "train_loss", "train_acc", "test_acc", "bytes_up", "bytes_down", "wall_s",
                    "epsilon", "delta"):
            assert r[key] is not None, key
    s = json.loads((out / "summary.json").read_text())
    for key in ("strategy", "dataset", "num_parties", "transport", "epochs", "final_test_acc", "total_bytes_up",
                "total_bytes_down", "payload_bytes_up", "payload_bytes_down", "formula_bytes",
                "information_bound_bytes", "bits_per_element", "epsilon", "delta"):
        assert key in s, key
    assert s["transport"] == "inprocess" and s["epochs"] == 2 and s["num_parties"] == 4
    assert s["total_bytes_up"] == sum(r["bytes_up"] for r in lines)
    assert (out / "plots" / "accuracy.png").stat().st_size > 1000
    assert (out / "plots" / "bytes.png").stat().st_size > 1000
    assert (out / "checkpoints" / "latest").read_text().strip() == "epoch_00001"
    assert '"final_test_acc"' in capsys.readouterr().out


def test_resume_from_cli_continues_to_more_epochs(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "demo", "--out", str(out), *FAST]) == 0
    assert main(["run", "--resume", str(out), "--no-progress", "--set", "train.epochs=3"]) == 0
    assert [r["epoch"] for r in _lines(out / "metrics.jsonl")] == [0, 1, 2]


@pytest.mark.parametrize("override,key", [
    ("num_parties=0", "num_parties"),
    ("num_parties=65", "num_parties"),           # digits has 64 features
    ("params.beta=0.3", "params.beta"),
    ("params.b=0", "params.b"),
    ("model.fusion=concat", "model.fusion"),      # SecAgg needs additive fusion
    ("train.lr=-1", "train.lr"),
    ("nonsense=1", "nonsense"),
    ("dataset=nope", "dataset"),
])
def test_bad_config_exits_2_with_one_line_naming_the_key(override, key, tmp_path, capsys):
    code = main(["run", "demo", "--out", str(tmp_path / "x"), "--transport", "inprocess", "--set", override])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"vfl: error: {key}:"), err


def test_missing_config_file_and_missing_data_exit_2(tmp_path, capsys):
    assert main(["run", str(tmp_path / "none.yaml")]) == 2
    assert "not found" in capsys.readouterr().err
    code = main(["run", "demo", "--transport", "inprocess", "--out", str(tmp_path / "y"), "--set", "dataset=har",
                 "--set", f"data.data_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2 and "UCI HAR Dataset" in err and "archive.ics.uci.edu" in err


def test_strategies_and_account_commands(capsys):
    assert main(["strategies"]) == 0
    names = capsys.readouterr().out
    for n in ("npq", "pbm", "ldp", "npq+secagg", "p3eft", "split-lora", "sap"):
        assert n in names
    assert main(["account", "--mechanism", "pbm", "--b", "16", "--beta", "0.25", "--parties", "10", "--alpha", "2",
                 "--epochs", "10", "--batch", "100", "--dataset-size", "7352", "--dim", "16", "--delta", "1e-5",
                 "--c0", "1"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["rdp"] == pytest.approx(2.4315, abs=1e-3)
    assert rep["epsilon"] > 0 and rep["delta"] == 1e-5
    assert rep["theorem_6_1"]["iterations"] == pytest.approx(10 * 7352 / 100)  # what --batch/--dataset-size set


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("run", "strategies", "account", "datasets"):
        assert cmd in out


def test_an_existing_run_directory_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "demo", "--out", str(out), *FAST]) == 0
    before = (out / "metrics.jsonl").read_text()
    assert main(["run", "demo", "--out", str(out), *FAST]) == 2
    assert "--resume" in capsys.readouterr().err
    assert (out / "metrics.jsonl").read_text() == before
