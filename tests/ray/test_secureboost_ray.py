"""``secureboost`` over Ray actors: the label holder's randomizer worker starts inside its actor, and the
trees are the in-process clear path's."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from parties.trees.wire import LABEL_HOLDER_ID
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")


def _cfg(kind: str, **params):
    return load_run_config({"strategy": "secureboost", "num_parties": 3, "seed": 4,
                            "transport": {"kind": kind, "cpus_per_actor": 0.1},
                            "params": {"n_estimators": 2, "max_depth": 3, "max_bin": 16,
                                       "objective": "multi:softprob", **params}})


def _trees(engine):
    return engine.transport.host_call(engine.groups[0].name, "call", LABEL_HOLDER_ID, "state")["trees"]


@pytest.mark.ray
def test_paillier_over_ray_grows_the_in_process_clear_trees(ray_local):
    from vfl.runtime.transport.ray_transport import RayTransport

    data = BlobSource(num_parties=3)
    clear = Engine(_cfg("inprocess", he="none", allow_insecure=True), InProcessTransport(), data, progress=False)
    ref = clear.run()
    engine = Engine(_cfg("ray"), RayTransport(), data, progress=False)
    try:
        res = engine.run()
        assert _trees(engine) == _trees(clear)
    finally:
        engine.transport.shutdown()
    assert res.summary["transport"] == "ray" and res.summary["he"] == "paillier" and res.summary["n_trees"] == 6
    assert res.summary["final_test_acc"] == ref.summary["final_test_acc"]
