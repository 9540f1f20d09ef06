"""The parties' own release reports over Ray actors: the same summary keys as in-process (seeded noise),
and asked of every host before the first answer is awaited (``RayTransport.call_all``), so the hosts'
first reports (each imports scipy and dp_accounting) run concurrently, not one after another."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.release_runs import SOURCE, tiny_cfg
from vfl.engine.engine import Engine
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.runtime.transport.ray_transport import RayTransport

pytestmark = [pytest.mark.ray]


class _Spy:
    """An actor handle whose ``call.remote`` notes the submission (the driver side of a control call)."""

    def __init__(self, actor: Any, log: list[str]) -> None:
        self._actor, self._log = actor, log

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._actor, name)
        if name != "call":
            return attr
        log = self._log

        class _Method:
            @staticmethod
            def remote(*args: Any, **kwargs: Any) -> Any:
                log.append("submit")
                return attr.remote(*args, **kwargs)

        return _Method


def test_reports_are_asked_of_every_host_before_any_answer_and_match_in_process(ray_local) -> None:
    cfg = tiny_cfg("pbm", privacy={"noise_rng": "seeded"}, train={"epochs": 2},
                   transport={"kind": "ray", "parties_per_actor": 1})
    inproc = Engine(cfg, InProcessTransport(), SOURCE, progress=False)
    inproc.run()
    transport = RayTransport()
    try:
        engine = Engine(cfg, transport, SOURCE, progress=False)
        engine.run()
        over_ray = engine.summary([])
        log: list[str] = []
        transport.actors = {g: _Spy(a, log) for g, a in transport.actors.items()}
        get = transport._get
        transport._get = lambda futures, *, round: (log.append("get"), get(futures, round=round))[1]  # type: ignore[method-assign]
        grid = engine.grid
        calls = [(grid.group_of[p], p, "release_report") for p in grid.party_ids]
        together = transport.call_all(calls)
        alone = [transport.call(*c) for c in calls]
    finally:
        transport.shutdown()
    assert len(calls) == 3 and log[:6] == ["submit"] * 3 + ["get"] * 3  # the control: call() alternates
    assert log[6:] == ["submit", "get"] * 3
    assert together == alone and all(r is not None for r in together)
    keys = [k for k in inproc.summary([]) if k.startswith("party_")]
    assert keys and {k: over_ray[k] for k in keys} == {k: inproc.summary([])[k] for k in keys}
