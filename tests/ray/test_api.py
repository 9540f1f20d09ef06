"""The Python API (``vfl.run``, ``vfl.account``) is what the CLI runs: the tests over Ray actors."""

from __future__ import annotations

import pytest

import vfl
from tests.e2e.test_api import TINY  # noqa: F401


@pytest.mark.ray
def test_models_by_import_string_are_resolved_inside_the_ray_actors(ray_local):
    result = vfl.run("demo", transport="ray", overrides=[*TINY, "train.epochs=1",
                                                         "model.bottom=tests.support.byo_models:TinyBottom"])
    assert result.summary["transport"] == "ray" and result.summary["final_test_acc"] is not None
