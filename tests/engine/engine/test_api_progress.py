"""``vfl.run`` in a notebook: the tests through in-process engine runs."""

from __future__ import annotations

import pytest

import vfl
import vfl.engine.api
from tests.unit.engine.test_api_progress import BARE_KERNEL  # noqa: F401

TINY = {"params.b": 8, "data.train_subsample": 128, "data.test_subsample": 64, "train.epochs": 2}


def test_a_kernel_without_widgets_prints_one_line_per_epoch(monkeypatch, capsys):
    monkeypatch.setattr(vfl.engine.api, "detect", lambda: BARE_KERNEL)
    seen = []
    result = vfl.run("demo", overrides=TINY, on_epoch_end=lambda e, row, engine: seen.append(e))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("epoch ")]
    assert [ln.split()[1] for ln in lines] == ["1/2", "2/2"] and seen == [0, 1]  # the user's hook still runs
    assert f"{result.history[-1]['train_loss']:.4f}" in lines[-1]


def test_progress_false_prints_nothing_even_in_a_kernel(monkeypatch, capsys):
    monkeypatch.setattr(vfl.engine.api, "detect", lambda: BARE_KERNEL)
    vfl.run("demo", overrides=TINY, progress=False)
    assert not [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("epoch ")]


def test_the_in_process_default_over_a_ray_config_warns_once(monkeypatch, recwarn):
    monkeypatch.setattr(vfl.engine.api, "_noted_transport", [])
    assert vfl.engine.api._api_transport({"transport": {"kind": "inprocess"}}, (), None) == "inprocess"  # silent
    assert not recwarn.list
    with pytest.warns(UserWarning, match=r"transport.kind is 'ray'.*transport=None"):
        result = vfl.run("demo", overrides=TINY, progress=False)  # the demo's kind is ray
    assert result.summary["transport"] == "inprocess"
    assert vfl.engine.api._api_transport("demo", (), None) == "inprocess"  # once per process, not once per call
    assert not [w for w in recwarn.list if "transport" in str(w.message)]


def test_an_explicit_inprocess_is_obeyed_silently(monkeypatch, recwarn):
    monkeypatch.setattr(vfl.engine.api, "_noted_transport", [])
    result = vfl.run("demo", overrides=TINY, transport="inprocess", progress=False)  # as `vfl sweep` tasks pass it
    assert result.summary["transport"] == "inprocess" and not vfl.engine.api._noted_transport
    assert not [w for w in recwarn.list if "transport" in str(w.message)]
    with pytest.raises(vfl.ConfigError):  # explicit in-process with a cluster address: refused, never rerouted
        vfl.run("demo", overrides={**TINY, "transport.address": "10.0.0.1:6379"}, transport="inprocess")
