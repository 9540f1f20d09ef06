"""``report.json``/``report.md`` name files relative to the run directory (no absolute path of the
machine that wrote them): a run directory moved or copied whole keeps a report whose links work."""

from __future__ import annotations

import json
import shutil

import pytest

from simulations.cli.runner import execute, resolve_config
from simulations.report.render import build_report

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_the_report_of_a_moved_run_still_finds_its_figures(tmp_path):
    base = {"name": "t", "dataset": "digits", "num_parties": 2, "strategy": "npq", "transport": {"kind": "inprocess"},
            "data": {"train_subsample": 256, "test_subsample": 128}, "train": {"epochs": 1},
            "privacy": {"record_views": True}}
    run = tmp_path / "run"
    execute(resolve_config(base), out_dir=run, progress=False)
    rep = build_report(run, names=("label_inference", "feature_reconstruction"))
    text = (run / "report.json").read_text() + (run / "report.md").read_text()
    assert str(tmp_path) not in text  # was: "run": "/tmp/.../run" and absolute attack figures
    assert rep["run"] == "run"
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(run, moved)
    saved = json.loads((moved / "report.json").read_text())
    figures = saved["figures"] + [a["figure"] for a in saved["attacks"] if a.get("figure")]
    assert any(a.get("figure") for a in saved["attacks"])  # an attack's own figure is among them
    assert figures and all((moved / f).is_file() for f in figures)
