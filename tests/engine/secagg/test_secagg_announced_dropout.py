"""SecAgg mode ``announced`` with ``train.on_dropout: skip-party``: a party killed mid-epoch leaves its round
closed (nothing revealed, no update from that batch), the server announces the survivors with its next
request and the run goes on with them; too few survivors fail with PartyFailure; without skip-party the same
kill is a PartyFailure (the epoch restart of ``test_secagg_announced``). Real nodes and messages, in-process."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import strategies  # noqa: F401
from parties.secagg import wire as sw
from parties.secagg.party import announced_of
from parties.vertical import wire as vw
from tests.engine.secagg.test_secagg_dropout import Keeping
from tests.support.helpers import BlobSource
from vfl.core.errors import PartyFailure, ProtocolError
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime import message as wire
from vfl.runtime.faults import FAULT_ENV
from vfl.secagg import SecAggClient, SecAggServer
from vfl.secagg.announce import RoundSkipped

M, STEPS = 4, 6  # 300 training samples, batch 50
IDS = [1, 2, 3, 4]  # node ids of party0..party3


def _run(mode: str, fault: str | None, monkeypatch: pytest.MonkeyPatch, *, on_dropout: str = "skip-party",
         **params: Any) -> tuple[Any, Keeping]:
    if fault:
        monkeypatch.setenv(FAULT_ENV, fault)
    else:
        monkeypatch.delenv(FAULT_ENV, raising=False)
    cfg = load_run_config({"strategy": "pbm-audited", "num_parties": M, "seed": 1, "params": {"secagg_mode": mode, **params},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "transport": {"parties_per_actor": 1},  # a kill takes one party, whatever the machine
                           "privacy": {"noise_rng": "seeded"},  # reproducible accuracy (the checks are on the protocol)
                           "train": {"epochs": 2, "batch_size": 50, "on_dropout": on_dropout}})
    transport = Keeping()
    return Engine(cfg, transport, BlobSource(num_parties=M, num_train=300), progress=False).run(), transport


def _announced(transport: Keeping) -> set[tuple[str, str, tuple[int, ...]]]:
    """(kind, round, set) of every server message naming a set (each broadcast once, however many hosts saw it)."""
    out = set()
    for w in transport.wires:
        if w.src == 0 and w.kind in (vw.Kind.TRAIN_FORWARD, sw.Kind.ANNOUNCE):
            if (s := announced_of(wire.decode(w.data), IDS)) is not None:
                out.add((w.kind, w.round, tuple(sorted(s))))
    return out


def _summed(transport: Keeping, rnd: str) -> list[int]:
    """The parties the server summed in ``rnd``, checked against their plain inputs (the audit hook)."""
    server = transport.nodes[0]
    total, got = server.audit_sums()[rnd]
    truth = sum(np.asarray(transport.nodes[p].audit_inputs()[rnd], dtype=np.int64) for p in got)
    np.testing.assert_array_equal(np.asarray(total), truth % (1 << server.k))
    return list(got)


def test_a_party_killed_mid_epoch_skips_its_round_and_the_survivors_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    res, transport = _run("announced", "party2@1:2", monkeypatch)  # party2 dies before sending step 2 of epoch 1
    s, server = res.summary, transport.nodes[0]
    assert s["dropouts"] == [{"party": "party2", "epoch": 1, "step": 2, "phase": "train", "cause": "died",
                              "contributed": [], "recovery_bytes": 0, "skipped": True}]
    assert "train:1:2" not in server.audit_sums()  # the round stayed closed: no sum, no key revealed
    assert _summed(transport, "train:1:1") == IDS and _summed(transport, "train:1:3") == [1, 2, 4]
    assert all(_summed(transport, f"train:1:{k}") == [1, 2, 4] for k in range(3, STEPS))
    # the survivors' set goes out once, in the skipped round's reply (the forward of step 3, no gradient)
    assert _announced(transport) == {(vw.Kind.TRAIN_FORWARD, "train:1:2", (1, 2, 4))}
    skip = [wire.decode(w.data) for w in transport.wires if w.src == 0 and w.round == "train:1:2"]
    assert skip and not any(wire.has_array(m, vw.Record.GRAD) for m in skip)
    # the head stepped on every other batch of the epoch, none from the skipped one
    assert sorted(r for r in server.audit_sums() if r.startswith("train:1:")) == [f"train:1:{k}" for k in (0, 1, 3, 4, 5)]
    assert not any(w.kind in sw.ROUND_KINDS for w in transport.wires)  # nothing is ever revealed after masking
    assert [r["parties_active"] for r in res.history] == [M, M - 1]
    clean, _ = _run("announced", None, monkeypatch)
    assert np.isfinite(res.history[-1]["train_loss"])
    assert s["final_test_acc"] > 1.5 / 3 and s["final_test_acc"] >= clean.summary["final_test_acc"] - 0.15
    # the skipped step's releases stay charged: the same epsilon as semi-honest recovering the round, more than clean
    semi, _ = _run("semi-honest", "party2@1:2", monkeypatch)
    assert s["epsilon"] == semi.summary["epsilon"] > clean.summary["epsilon"]


@pytest.mark.parametrize("fault,rnd", [("party2@0:5", "train:0:5"), ("party2@eval:0:0", "eval:0:0")])
def test_where_no_forward_follows_an_announce_broadcast_names_the_survivors(fault, rnd, monkeypatch) -> None:
    """The epoch's last step and an evaluation round have no next forward from the server: the survivors'
    set goes out in an ANNOUNCE broadcast, and the next round (the driver's request) is masked over it."""
    res, transport = _run("announced", fault, monkeypatch)
    (rec,) = res.summary["dropouts"]
    assert rec["skipped"] and rec["contributed"] == [] and f"{rec['phase']}:{rec['epoch']}:{rec['step']}" == rnd
    assert _announced(transport) == {(sw.Kind.ANNOUNCE, rnd, (1, 2, 4))}
    assert rnd not in transport.nodes[0].audit_sums()
    assert _summed(transport, "train:1:0") == [1, 2, 4] and res.summary["epochs"] == 2
    assert res.summary["final_test_acc"] is not None


def test_too_few_survivors_fail_the_run_with_party_failure(monkeypatch) -> None:
    # t = 3 at M = 4 (undeclared colluders: t - 1 = 2): honest parties mask over no set below 4; two parties die
    with pytest.raises(PartyFailure, match=r"party 3,4 failed in round train:0:2: only \[1, 2\] left.*max\(t, 2, "
                       r"colluders \+ 2\) = 4") as info:
        _run("announced", "party2@0:2,party3@0:2", monkeypatch, threshold=3)
    assert not isinstance(info.value, RoundSkipped)


def test_control_without_skip_party_the_kill_is_a_party_failure(monkeypatch) -> None:
    with pytest.raises(PartyFailure) as info:
        _run("announced", "party2@1:2", monkeypatch, on_dropout="fail")
    assert (info.value.party, info.value.round) == ("party2", "train:1:2") and not isinstance(info.value, RoundSkipped)


# ---- the SecAgg server alone -------------------------------------------------------------------------------
def _masked(m: int, t: int, rnd: str, members: list[int]) -> dict[int, np.ndarray]:
    clients = {i: SecAggClient(i, range(m), t, b"skip-test", mode="announced") for i in range(m)}
    keys = {i: c.public_key() for i, c in clients.items()}
    out = {}
    for i in members:
        clients[i].receive_public_keys(keys)
        clients[i].announce(round_id=rnd, members=range(m))
        out[i] = clients[i].mask(np.arange(5) + i, round_id=rnd, name="emb", k=16)
    return out


def test_only_a_declared_dropout_skips_a_round_and_the_round_never_opens() -> None:
    server = SecAggServer(range(4), 2, 16, b"skip-test", mode="announced")
    ys = _masked(4, 2, "train:0:1", [0, 1, 3])
    with pytest.raises(PartyFailure) as undeclared:  # a party the driver did not declare gone: as before
        server.open_round(ys, round_id="train:0:1", name="emb")
    assert not isinstance(undeclared.value, RoundSkipped)
    server = SecAggServer(range(4), 2, 16, b"skip-test", mode="announced")
    server.drop([2])
    with pytest.raises(RoundSkipped, match="party 2 failed in round train:0:1.*stays closed"):
        server.open_round(ys, round_id="train:0:1", name="emb")
    with pytest.raises(ProtocolError, match="not ready"):
        server.result("train:0:1")  # never a sum
    assert server.next_announcement() == (0, 1, 3) and server.next_announcement() is None
    with pytest.raises(ProtocolError, match="declared dropped"):
        server.open_round({2: ys[0]}, round_id="train:0:2", name="emb")
    with pytest.raises(ProtocolError, match="only secagg mode announced"):
        SecAggServer(range(4), 2, 16, b"skip-test").drop([2])
