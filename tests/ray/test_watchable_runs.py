"""A run you can watch from a log: the tests over Ray actors."""

from __future__ import annotations

import pytest

import vfl
from tests.e2e.test_watchable_runs import TINY  # noqa: F401


@pytest.mark.ray
def test_ray_session_files_stay_out_of_the_run_directory(tmp_path):
    out = tmp_path / "r"  # short enough that Ray's sockets used to fit inside it (ray-tmp/)
    vfl.run("demo", out_dir=out, transport="ray", overrides={**TINY, "train.epochs": 1})
    names = {p.name for p in out.iterdir()}
    assert "summary.json" in names
    assert not {n for n in names if n.startswith("ray-tmp")}, names
