"""Contract over Ray: every vertical strategy runs 2 epochs over Ray actors and counts like in-process."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.engine.parties.test_vertical_strategies import VERTICAL, _run  # noqa: F401
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.runtime.transport.ray_transport import RayTransport


@pytest.mark.ray
@pytest.mark.parametrize("name", VERTICAL)
def test_two_epochs_over_ray_counts_like_inprocess(name, ray_local):
    ray_res = _run(name, RayTransport())
    ref = _run(name, InProcessTransport())
    for key in ("payload_bytes_up", "payload_bytes_down", "messages_up", "messages_down"):
        assert ray_res.summary[key] == ref.summary[key], key
    assert ray_res.summary["transport"] == "ray"
