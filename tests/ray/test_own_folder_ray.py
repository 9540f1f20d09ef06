"""Over Ray actors, a model by import string from the folder ``vfl`` runs in builds in every actor
without ``PYTHONPATH=.`` (each actor resolves the string itself: Ray puts the driver's working
directory on its workers' path, and the CLI puts it on the driver's)."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_own_folder import SMALL
from tests.support.own_folder import own_folder, run_vfl


@pytest.mark.ray
def test_a_model_by_import_string_from_the_working_directory_trains_over_ray(tmp_path):
    work, vfl = own_folder(tmp_path)
    done = run_vfl(vfl, "run", "demo", "--out", "run", "--set", "model.bottom=my_pkg.models:MyBottom", *SMALL, cwd=work)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((work / "run" / "summary.json").read_text())
    assert summary["transport"] == "ray" and summary["epochs"] == 1
