"""The example strategy of docs/writing-a-strategy.md runs exactly as printed, and does what it
says: the parties' upload payload is half of npq's on the same run, at about the same accuracy."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import vfl
from vfl.engine.strategy import STRATEGIES

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-a-strategy.md"
TINY = ["params={}", "data.train_subsample=256", "data.test_subsample=128", "train.epochs=2"]


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    return next(b for b in blocks if "@register" in b)


def test_the_documented_strategy_is_short_and_runs(tmp_path, monkeypatch):
    code = _example()
    assert len(code.strip().splitlines()) < 60
    (tmp_path / "my_half_doc.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("my_half_doc")
    try:
        half = vfl.run("demo", overrides=["strategy=half", *TINY])
        npq = vfl.run("demo", overrides=["strategy=npq", *TINY])
    finally:  # leave the registry as the other tests expect it
        sys.modules.pop("my_half_doc", None)
        STRATEGIES._items.pop("half", None)
        STRATEGIES._help.pop("half", None)
    assert half.summary["strategy"] == "half"
    assert 2 * half.summary["payload_bytes_up"] == npq.summary["payload_bytes_up"] > 0
    assert half.summary["payload_bytes_down"] == npq.summary["payload_bytes_down"]  # gradients stay float32
    assert abs(half.summary["final_test_acc"] - npq.summary["final_test_acc"]) <= 0.05


def test_the_documented_strategy_imports_the_framework_from_vfl_only():
    """README promises a strategy with "everything imported from `vfl`": no module of the layers above
    (parties, strategies, simulations) and no flwr in the example (before: parties.vertical.wire,
    strategies.base.vertical and flwr.common)."""
    tree = ast.parse(_example())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert modules == {"__future__", "dataclasses", "vfl"}, modules

