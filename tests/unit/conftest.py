"""The unit lane (``make test-fast``): a test here starts no engine run, no subprocess and no Ray.

Each is refused with one line naming the lane the test belongs in, so the lane stays what its
folder says without a hand-kept list (tests/engine/, tests/ray/, tests/e2e/ are the others).
"""

from __future__ import annotations

import subprocess

import numpy.testing  # noqa: F401  (numpy 1.26 probes the CPU with a subprocess on its first import: here, not in a test)
import pytest


class LaneError(AssertionError):
    """A unit test reached for an engine, a subprocess or Ray."""


def _refuse(what: str, lane: str):  # type: ignore[no-untyped-def]
    def refused(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise LaneError(f"a unit test {what}: move it to tests/{lane}/ (tests/unit/conftest.py)")

    return refused


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Unit tests compute on tiny tensors: one torch thread each (threads only contend on small work)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _unit_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    from vfl.engine.engine import Engine

    monkeypatch.setattr(Engine, "run", _refuse("runs an engine", "engine"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("starts a subprocess", "e2e"))
    try:
        import ray
    except ImportError:  # pragma: no cover - ray is a core dependency
        return
    monkeypatch.setattr(ray, "init", _refuse("starts Ray", "ray"))
