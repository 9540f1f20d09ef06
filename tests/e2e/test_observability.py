"""Dry runs write nothing; invalid configs leave no directory; summary.json says which software ran;
logging levels; the csv tracker mirrors metrics.jsonl; a missing tracker extra is named up front."""

from __future__ import annotations

import csv
import json
import logging

import pytest
import yaml

import vfl
from simulations.cli.main import main
from vfl.engine.tracking import CSV_FILE

FAST = ["--transport", "inprocess", "--no-progress", "--set", "train.epochs=2", "--set", "params.b=8",
        "--set", "data.train_subsample=128", "--set", "data.test_subsample=64"]


def test_dry_run_prints_the_resolved_config_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    assert main(["run", "demo", "--dry-run", "--out", str(out), *FAST]) == 0
    captured = capsys.readouterr()
    cfg = yaml.safe_load(captured.out)
    assert cfg["strategy"] == "pbm" and cfg["train"]["epochs"] == 2 and cfg["transport"]["kind"] == "inprocess"
    assert cfg["params"]["b"] == 8 and cfg["tracking"] == "none"
    assert "dry run" in captured.err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("override, key", [("train.lr=-1", "train.lr"), ("tracking=nope", "tracking"),
                                           ("params.b=0", "params.b"), ("dataset=nope", "dataset")])
@pytest.mark.parametrize("dry", [False, True])
def test_an_invalid_config_leaves_no_run_directory(tmp_path, capsys, override, key, dry):
    out = tmp_path / "run"
    code = main(["run", "demo", "--out", str(out), *(["--dry-run"] if dry else []), *FAST, "--set", override])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and key in err, err
    assert not out.exists()


def test_a_missing_tracker_extra_is_named_before_anything_is_written(tmp_path, capsys):
    import importlib.util

    if importlib.util.find_spec("mlflow") is not None:
        pytest.skip("mlflow is installed here")
    out = tmp_path / "run"
    assert main(["run", "demo", "--out", str(out), *FAST, "--set", "tracking=mlflow"]) == 2
    err = capsys.readouterr().err
    assert "tracking" in err and "pip install -e '.[mlflow]'" in err and not out.exists()


def test_csv_tracking_mirrors_metrics_and_summary_records_versions(tmp_path):
    out = tmp_path / "run"
    result = vfl.run("demo", out_dir=out, overrides=["params.b=8", "data.train_subsample=128",
                                                     "data.test_subsample=64", "train.epochs=2", "tracking=csv"])
    with open(out / CSV_FILE) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    for row, ref in zip(rows, result.history, strict=True):
        assert float(row["train_loss"]) == pytest.approx(ref["train_loss"], rel=1e-12)
        assert int(row["bytes_up"]) == ref["bytes_up"] and float(row["epsilon"]) == pytest.approx(ref["epsilon"])
    v = json.loads((out / "summary.json").read_text())["versions"]
    import torch

    assert v["torch"] == torch.__version__.split("+")[0] or v["torch"] == torch.__version__
    for key in ("flwr", "ray", "transformers", "peft", "cryptography", "dp-accounting", "python", "platform"):
        assert v[key], key
    assert "git_commit" in v  # a hex id in a checkout, None elsewhere (never an error)


def test_git_commit_is_none_outside_a_checkout(tmp_path):
    from vfl.engine.versions import git_commit

    assert git_commit(tmp_path) is None


def test_log_levels_from_flags():
    from vfl.core.logs import level_from_flags, setup_logging

    assert level_from_flags(log_level=None, verbose=0, quiet=0) == "warning"
    assert level_from_flags(log_level=None, verbose=1, quiet=0) == "info"
    assert level_from_flags(log_level=None, verbose=5, quiet=0) == "debug"
    assert level_from_flags(log_level=None, verbose=0, quiet=1) == "error"
    assert level_from_flags(log_level="debug", verbose=0, quiet=3) == "debug"
    try:
        setup_logging("debug")
        assert logging.getLogger("vfl.engine.engine").getEffectiveLevel() == logging.DEBUG
        setup_logging("error")
        assert logging.getLogger("simulations.cli.runner").getEffectiveLevel() == logging.ERROR
    finally:
        setup_logging("warning")


def test_verbose_shows_debug_lines_and_quiet_hides_warnings(tmp_path, capsys):
    from vfl.engine.checkpoint import stderr_warning

    try:
        assert main(["-vv", "account", "--mechanism", "pbm", "--b", "8", "--beta", "0.25", "--parties", "2",
                     "--alpha", "2"]) == 0
        logging.getLogger("vfl.test").debug("a debug line")
        assert "vfl: debug: vfl.test: a debug line" in capsys.readouterr().err
        assert main(["-q", "account", "--mechanism", "pbm", "--b", "8", "--beta", "0.25", "--parties", "2",
                     "--alpha", "2"]) == 0
        stderr_warning("hidden")
        assert "hidden" not in capsys.readouterr().err
    finally:
        main(["account", "--mechanism", "pbm", "--b", "8", "--beta", "0.25", "--parties", "2", "--alpha", "2"])
    stderr_warning("shown")
    assert "vfl: warning: shown" in capsys.readouterr().err
