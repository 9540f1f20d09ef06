"""``train.on_failure: restart`` covers a host dying while it starts and one dying after the last checkpoint,
before its end-of-run report (issue 47, item 3). Before, both ended the run at once ("party ... failed in round
control") with every restart unused. The controls: the same runs without the death."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.support.release_runs import SOURCE, tiny_cfg
from vfl.core.errors import PartyFailure
from vfl.engine.engine import Engine
from vfl.runtime.faults import InjectedCrash
from vfl.runtime.transport.inprocess import InProcessTransport


def _cfg():
    return tiny_cfg("pbm", train={"epochs": 1, "on_failure": "restart", "max_restarts": 1})


@pytest.mark.parametrize("dies", [True, False], ids=["dies", "control"])
def test_a_party_dying_before_its_end_of_run_report_is_restarted(monkeypatch, dies):
    real_call, died = InProcessTransport.call, []

    def call(self, group, node_id, method, *args, **kwargs):
        if dies and method == "release_report" and not died:  # its actor died after the last checkpoint
            died.append(group)
            self.dead[group] = InjectedCrash(self._names(group), [])
            raise PartyFailure(self._names(group), "control", "its Ray actor died")
        return real_call(self, group, node_id, method, *args, **kwargs)

    monkeypatch.setattr(InProcessTransport, "call", call)
    result = Engine(_cfg(), InProcessTransport(), SOURCE, progress=False).run()
    summary = result.summary
    assert summary["party_epsilon_worst_case"] > 0 and summary["party_release_cap"] == 1 + 1 + 2
    assert [r["round"] for r in summary["restarts"]] == (["control"] if dies else [])
    assert summary["party_releases_max"] == 1  # the restored party kept its count from the checkpoint


@pytest.mark.parametrize("dies", [True, False], ids=["dies", "control"])
def test_a_host_dying_while_it_starts_is_started_again(monkeypatch, dies):
    real_start, tries = InProcessTransport.start, []

    def start(self, groups, build, *, threads=1):
        tries.append(1)
        if dies and len(tries) == 1:
            raise PartyFailure("party1", "setup", "its Ray actor died")
        return real_start(self, groups, build, threads=threads)

    monkeypatch.setattr(InProcessTransport, "start", start)
    result = Engine(_cfg(), InProcessTransport(), SOURCE, progress=False).run()
    assert len(result.history) == 1 and len(tries) == (2 if dies else 1)
    assert [(r["round"], r["epoch"]) for r in result.summary["restarts"]] == ([("setup", -1)] if dies else [])
