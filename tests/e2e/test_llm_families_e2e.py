"""Every supported model family through the runner (engine, in-process transport, run directory):
``sap`` with a trainable bottom (the vendor's gradient goes back into the customer's rebuilt bottom)
and ``p3eft`` (two servers, private backprop) each run one epoch on a tiny model of the family."""

from __future__ import annotations

import json

import pytest

from parties.llm.common.tiny import FAMILIES
from simulations.cli.runner import execute, resolve_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py; 20 families


def _run(strategy, path, out, **params):
    raw = {"name": f"{strategy}-family", "strategy": strategy, "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
           "data": {"train_subsample": 16, "test_subsample": 8},
           "train": {"epochs": 1, "batch_size": 8, "optimizer": "adam", "lr": 1e-3},
           "params": {"max_len": 12, "model_dir": path, "lora_rank": 2, **params}}
    execute(resolve_config(raw), out_dir=out, progress=False)
    return json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_runs_sap_and_p3eft(tmp_path, family, tiny_lm):
    path = tiny_lm(family)
    s = _run("sap", path, tmp_path / "sap", split=1, frozen_bottom=False, eta=100.0, eia_samples=2, eia_steps=3)
    assert "train.bottom_grad" in s["bytes_by_kind"] and 0.0 <= s["test_acc"] <= 1.0
    s = _run("p3eft", path, tmp_path / "p3eft", alpha=1.0, leak_window=16)
    assert s["bytes_by_kind"]["train.backprop"]["messages"] == 2 * 2 * 2 and 0.0 <= s["test_acc"] <= 1.0
