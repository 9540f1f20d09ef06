"""``transport.compiled_graph: auto`` times both paths on the run's own steps and keeps the faster: the tests over Ray actors."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import strategies  # noqa: F401
from strategies.base import compiled_auto, compiled_epoch, vertical
from strategies.base.compiled_auto import COMPILED, TASK, PathChoice
from tests.engine.runtime.test_compiled_auto import N
from tests.ray.test_compiled_graph import LEDGER_KEYS, _cfg
from tests.support.helpers import ChainSpy, run_with_states, state_tensors


def _auto_run(monkeypatch: pytest.MonkeyPatch, margin: float) -> tuple[Any, ...]:
    from vfl.runtime.transport.ray_transport import RayTransport

    monkeypatch.setattr(compiled_epoch, "MIN_AUTO_STEPS", 1)  # probe this 10-step run
    monkeypatch.setattr(compiled_auto, "WIN_MARGIN", margin)
    monkeypatch.setattr(vertical, "PathChoice", lambda: PathChoice(rounds=1, block=2, warm=2))
    transport = RayTransport()
    spy = ChainSpy(transport)
    s, h, states = run_with_states(_cfg("npq+secagg", {}, compiled="auto", max_actors=2), num_train=N,
                                   transport=transport)
    return s, h, states, spy.runs


@pytest.mark.ray
def test_auto_equals_the_task_path_whichever_path_it_keeps(ray_local, monkeypatch):
    from vfl.runtime.transport.ray_transport import RayTransport

    ref_s, ref_h, ref_states = run_with_states(_cfg("npq+secagg", {}, compiled="off", max_actors=2), num_train=N,
                                               transport=RayTransport())
    # probe: task warm 2, task 2, compiled warm 1 (epoch 0 ends) + 1, compiled 2, then 2 on the kept path
    for margin, chosen, runs in ((-100.0, COMPILED, 1 + 1 + 2 + 2), (0.999, TASK, 1 + 1 + 2)):
        s, h, states, spied = _auto_run(monkeypatch, margin)
        choice = s["compiled_graph_choice"]
        assert choice["chosen"] == chosen and spied == runs, (choice, spied)
        assert choice["task_ms"] is not None and choice["compiled_ms"] is not None and choice["compile_s"] > 0
        assert [r["train_loss"] for r in h] == [r["train_loss"] for r in ref_h]
        assert [r["test_acc"] for r in h] == [r["test_acc"] for r in ref_h]
        for key in LEDGER_KEYS:
            assert s.get(key) == ref_s.get(key), key
        for a, b in zip(state_tensors(states), state_tensors(ref_states), strict=True):
            assert torch.equal(a, b)
    assert "compiled_graph_choice" not in ref_s  # only auto reports a choice
