"""``vfl sweep --resume`` continues only the experiment it started (issue 47, item 4) and reads its runs' files
checked (item 2): the config edited between a kill and the resume is refused in one line, where before the
table mixed 1- and 2-epoch runs as if one experiment; a damaged summary.json is one line, not a traceback."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from simulations.cli.main import main
from tests.e2e.test_sweep import TINY


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A finished two-seed sweep of a tiny config (1 epoch each)."""
    root = tmp_path_factory.mktemp("sweep-plan")
    cfg = root / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    out = root / "sweep"
    assert main(["sweep", str(cfg), "--seeds", "0,1", "--out", str(out)]) == 0
    return cfg, out


def _killed_copy(swept, tmp_path, *, epochs: int):
    """The sweep as a kill before its second run left it, and the config file as the user has it now."""
    cfg, out = swept
    copy = tmp_path / "sweep"
    shutil.copytree(out, copy)
    (second,) = [p for p in copy.iterdir() if p.name.startswith("001-")]
    shutil.rmtree(second)
    edited = tmp_path / "tiny.yaml"
    edited.write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], "epochs": epochs}}))
    return edited, copy


@pytest.mark.parametrize("epochs", [2, 1], ids=["config_edited", "control"])
def test_a_resume_runs_only_the_grid_it_started(swept, tmp_path, capsys, epochs):
    cfg, out = _killed_copy(swept, tmp_path, epochs=epochs)
    code = main(["sweep", str(cfg), "--seeds", "0,1", "--out", str(out), "--resume"])
    captured = capsys.readouterr()
    runs = sorted(p for p in out.iterdir() if p.is_dir())
    if epochs == 2:  # before: exit 0, a table of one 1-epoch and one 2-epoch run
        assert code == 2 and captured.err.count("\n") == 1, captured.err
        assert captured.err.startswith(f"vfl: error: --resume: {out} was started with another config or grid")
        assert len(runs) == 1  # nothing was run
    else:
        assert code == 0, captured.err
        assert [json.loads((r / "summary.json").read_text())["epochs"] for r in runs] == [1, 1]


@pytest.mark.parametrize("text", ['{"epsilon": 1.0, "epo', "[1, 2]", '{"final_test_acc": "0.9"}'])
def test_a_damaged_summary_of_a_finished_run_is_one_line(swept, tmp_path, capsys, text):
    cfg, out = swept
    copy = tmp_path / "sweep"
    shutil.copytree(out, copy)
    first = next(p for p in copy.iterdir() if p.name.startswith("000-"))
    (first / "summary.json").write_text(text)
    assert main(["sweep", str(cfg), "--seeds", "0,1", "--out", str(copy), "--resume"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{first / 'summary.json'}" in err and "Traceback" not in err, err
