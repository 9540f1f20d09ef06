"""The SecAgg audit hook (parties keep their plain inputs) never works in a run started with `vfl`.

``VFL_SECAGG_AUDIT=1`` exists so tests can check a recovered sum. A user (or a driver) that sets
it must not make a real run keep plain inputs: it needs the test-only opt-in ``VFL_TEST_HOOKS=1``
as well, and the CLI drops it whatever the environment says (so it is neither honoured in the
driver's process nor inherited by, or forwarded to, an actor). Controls: the same environment
and config through the engine (a test's driver) keeps the inputs; without the opt-in it does not.
"""

from __future__ import annotations

import os

import pytest

from simulations.cli.main import main
from simulations.cli.runner import resolve_config
from simulations.data.source import make_data_source
from vfl.engine.engine import Engine
from vfl.runtime import faults
from vfl.runtime.host import NodeHost
from vfl.runtime.transport.inprocess import InProcessTransport

SHORT = ["train.epochs=1", "data.train_subsample=120", "data.test_subsample=40", "train.batch_size=40"]


@pytest.fixture
def hosts(monkeypatch):
    """Every host the in-process transport builds (their nodes outlive the run)."""
    made: list[NodeHost] = []

    class Recording(NodeHost):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr("vfl.runtime.transport.inprocess.NodeHost", Recording)
    return made


def _kept(hosts: list[NodeHost]) -> dict[str, int]:
    """How many rounds of plain inputs (parties) and unmasked sums (server) the nodes kept."""
    nodes = [n for h in hosts for n in h.nodes.values()]
    inputs = sum(len(n.audit_inputs()) for n in nodes if hasattr(n, "audit_inputs"))
    sums = sum(len(n.audit_sums()) for n in nodes if hasattr(n, "audit_sums"))
    assert any(hasattr(n, "audit_inputs") for n in nodes)  # the SecAgg parties ran
    return {"inputs": inputs, "sums": sums}


@pytest.mark.parametrize("how", ["vfl-run", "control-engine", "control-no-opt-in"])
def test_plain_inputs_are_kept_only_by_a_test_driver_that_opts_in(tmp_path, monkeypatch, hosts, how):
    monkeypatch.setenv(faults.AUDIT_ENV, "1")
    if how == "control-no-opt-in":
        monkeypatch.delenv(faults.TEST_HOOKS_ENV, raising=False)
    else:
        monkeypatch.setenv(faults.TEST_HOOKS_ENV, "1")
    if how == "vfl-run":
        argv = ["run", "demo", "--transport", "inprocess", "--out", str(tmp_path / "run"), "--no-progress"]
        assert main([*argv, *(x for o in SHORT for x in ("--set", o))]) == 0
        assert os.environ[faults.AUDIT_ENV] == "1"  # the CLI's own environment is restored after it
    else:
        cfg = resolve_config("demo", SHORT, transport="inprocess")
        Engine(cfg, InProcessTransport(), make_data_source(cfg), progress=False).run()
    kept = _kept(hosts)
    if how == "control-engine":
        assert kept["inputs"] > 0 and kept["sums"] > 0
    else:
        assert kept == {"inputs": 0, "sums": 0}


def test_inside_the_cli_the_hook_is_neither_honoured_nor_forwarded(monkeypatch):
    monkeypatch.setenv(faults.AUDIT_ENV, "1")
    monkeypatch.setenv(faults.TEST_HOOKS_ENV, "1")
    assert faults.audit_enabled()  # control: a test's process with the opt-in
    with faults.no_test_hooks():
        forwarded = {k for k in faults.FORWARD_ENV if os.environ.get(k)}  # what RayTransport passes to actors
        assert faults.AUDIT_ENV not in forwarded and faults.AUDIT_ENV not in os.environ
        os.environ[faults.AUDIT_ENV] = "1"  # set again inside: still off in this process
        assert not faults.audit_enabled()
    assert faults.audit_enabled()
