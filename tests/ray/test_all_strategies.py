"""Contract over Ray: one strategy per family runs 2 epochs over Ray actors; the ledger is the sum of the wires."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401  (registers every strategy)
from tests.engine.parties.test_all_strategies import ALL, config, inprocess, run  # noqa: F401
from tests.support.wire_tap import ledger_bytes

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


RAY_QUICK = {"npq", "pbm", "head-only"}  # plain and SecAgg vertical, and a split LLM: each family over Ray
# (every strategy runs in-process in tests/engine/parties/test_all_strategies.py)


@pytest.mark.ray
@pytest.mark.parametrize("name", sorted(RAY_QUICK))
def test_two_epochs_over_ray_ledger_is_the_sum_of_the_wires(name, tiny_bert, ray_local, request):
    from vfl.runtime.transport.ray_transport import RayTransport

    cfg = config(name, tiny_bert, kind="ray", cpus_per_actor=0.1, max_actors=2)  # 2 party actors at most
    res, ledger, tap = run(cfg, RayTransport(), hops_visible=False)
    assert res.summary["transport"] == "ray" and len(res.history) == 2
    assert ledger_bytes(ledger) == tap.wire_bytes(use_rows=True)
    ref = inprocess(name, request)[0]
    for key in ("payload_bytes_up", "payload_bytes_down", "messages_up", "messages_down"):
        assert res.summary[key] == ref.summary[key], key
