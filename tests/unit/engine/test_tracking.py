"""Tracking that loses nothing, without the optional extras: the flattened config, several trackers
at once, names from the environment, and the ``on_epoch_end``/``on_step`` escape hatch."""

from __future__ import annotations

import importlib.util

import pytest

import vfl
from vfl.core.errors import ConfigError
from vfl.engine.tracking import check_tracking, flatten, kinds_of, run_info


def test_flatten_keeps_every_key():
    flat = flatten(vfl.resolve("demo").to_dict())
    assert flat["params.b"] == 16 and flat["params.beta"] == 0.25 and flat["train.lr"] == 0.05
    assert flat["model.bottom_hidden"] == "[32]" and flat["data.partition_opts"] == "{}"
    assert all(not isinstance(v, (dict, list)) for v in flat.values())
    assert len(flat) > 60  # every leaf of the config, not only the top-level scalars


def test_kinds_and_names(monkeypatch, tmp_path):
    assert kinds_of("none") == () and kinds_of(["csv", "none", "csv", "mlflow"]) == ("csv", "mlflow")
    info = run_info(name="demo", config={"a": {"b": 1}}, run_dir=tmp_path / "003-strategy=npq-seed0")
    assert (info.experiment, info.run_name, info.params) == ("demo", "003-strategy=npq-seed0", {"a.b": 1})
    monkeypatch.setenv("VFL_EXPERIMENT", "exp")
    monkeypatch.setenv("VFL_RUN_NAME", "mine")
    named = run_info(name="demo", config={}, run_dir=None)
    assert (named.experiment, named.run_name) == ("exp", "mine")


def test_an_unknown_or_missing_tracker_is_named():
    with pytest.raises(ConfigError) as err:
        check_tracking(["csv", "nope"])
    assert err.value.key == "tracking"
    if importlib.util.find_spec("wandb") is None:
        with pytest.raises(ConfigError, match=r"pip install -e '\.\[wandb\]'"):
            check_tracking(["csv", "wandb"])


