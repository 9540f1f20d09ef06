"""``vfl run --set model.bottom=my_pkg.models:MyBottom`` imports from the folder it runs in, without
``PYTHONPATH=.``: the CLI puts the working directory first on ``sys.path`` as ``python -m`` does."""

from __future__ import annotations

import json

from tests.support.own_folder import own_folder, run_vfl

SMALL = ["--no-progress", "--set", "train.epochs=1", "--set", "data.train_subsample=128", "--set",
         "data.test_subsample=32"]


def test_a_model_by_import_string_from_the_working_directory_trains_in_process(tmp_path):
    work, vfl = own_folder(tmp_path)
    done = run_vfl(vfl, "run", "demo", "--transport", "inprocess", "--out", "run",
                   "--set", "model.bottom=my_pkg.models:MyBottom", *SMALL, cwd=work)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((work / "run" / "summary.json").read_text())["epochs"] == 1
    assert "my_pkg.models:MyBottom" in (work / "run" / "config.resolved.yaml").read_text()


def test_python_safe_path_keeps_the_working_directory_off(tmp_path, monkeypatch):
    """``PYTHONSAFEPATH=1`` (``python -P``) is the user's word to keep it off: the import fails in one line."""
    work, vfl = own_folder(tmp_path)
    monkeypatch.setenv("PYTHONSAFEPATH", "1")
    import subprocess
    import sys

    from tests.support.own_folder import ROOT

    done = subprocess.run([sys.executable, "-P", str(vfl), "run", "demo", "--transport", "inprocess", "--dry-run",
                           "--set", "model.bottom=my_pkg.models:MyBottom"], cwd=work, text=True, capture_output=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert done.returncode == 2 and "No module named 'my_pkg'" in done.stderr, done.stderr[-2000:]
