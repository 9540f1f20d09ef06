"""Dropouts inside a round, in-process (real nodes, flwr messages, driver): a party dies mid-round and
``train.on_dropout: skip-party`` completes the round with exactly the survivors' sum, records it, and
accounts the parties actually summed; ``fail`` raises PartyFailure; nothing long-lived goes on the wire."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import strategies  # noqa: F401
from simulations.benchmarks.secagg_dropout import run_one
from simulations.cli.main import main
from tests.support.helpers import BlobSource
from vfl.core.errors import ConfigError, PartyFailure
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.privacy import Accountant
from vfl.privacy.accounting.events import PBMEvent
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.secagg.keys import private_key_bytes

M = 4


class Keeping(InProcessTransport):
    """Keeps the nodes (also of hosts that die) and every wire any host produced or received."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes: dict[int, Any] = {}
        self.wires: list[Any] = []

    def start(self, groups: Any, build: Any, *, threads: int = 1) -> None:
        super().start(groups, build, threads=threads)
        for host in self.hosts.values():
            self.nodes.update(host.nodes)
            deliver = host.deliver

            def recorded(wires: Any, deliver: Any = deliver) -> Any:
                self.wires.extend(wires)
                out = deliver(wires)
                self.wires.extend(out)
                return out

            host.deliver = recorded  # type: ignore[method-assign]


def _run(strategy: str, fault: str, monkeypatch: pytest.MonkeyPatch, *, on_dropout: str = "skip-party",
         epochs: int = 2, privacy: dict[str, Any] | None = None, **params: Any) -> tuple[Any, Keeping]:
    monkeypatch.setenv(FAULT_ENV, fault)
    cfg = load_run_config({"strategy": strategy, "num_parties": M, "seed": 1, "params": params,
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": epochs, "batch_size": 50, "on_dropout": on_dropout},
                           **({"privacy": privacy} if privacy else {})})
    transport = Keeping()
    return Engine(cfg, transport, BlobSource(num_parties=M, num_train=300), progress=False).run(), transport


def _check_recovered_sum(transport: Keeping, rnd: str, summed: list[int]) -> None:
    server = transport.nodes[0]
    total, got = server.audit_sums()[rnd]
    assert got == summed
    truth = sum(np.asarray(transport.nodes[p].audit_inputs()[rnd], dtype=np.int64) for p in summed)
    np.testing.assert_array_equal(np.asarray(total), truth % (1 << server.k))


def _epsilon(parties_per_epoch: list[int], b: int = 16, beta: float = 0.25, dim: int = 4) -> float:
    acc = Accountant()
    for m in parties_per_epoch:
        acc.record(PBMEvent(b=b, beta=beta, num_parties=m, dim=dim, count=1))
    return acc.epsilon(1e-5)[0]


def test_pbm_skip_party_finishes_the_round_with_the_survivors(monkeypatch: pytest.MonkeyPatch) -> None:
    res, transport = _run("pbm-audited", "party2@0:2", monkeypatch)
    s = res.summary
    assert s["dropouts"] == [{"party": "party2", "epoch": 0, "step": 2, "phase": "train", "cause": "died",
                              "contributed": ["party0", "party1", "party3"],
                              "recovery_bytes": s["recovery_bytes"]}]
    assert s["recovery_bytes"] > 0 and s["secagg_setup_bytes"] == s["setup_bytes"] > 0
    _check_recovered_sum(transport, "train:0:2", [1, 2, 4])  # node ids of party0, party1, party3
    _check_recovered_sum(transport, "train:1:0", [1, 2, 4])  # later rounds: the remaining parties
    assert [r["parties_active"] for r in res.history] == [3, 3]
    assert all(np.isfinite(r["train_loss"]) for r in res.history) and s["epochs"] == 2
    # M-1 binomials are summed from round 2 on: the accountant sees 3 parties in both epochs
    assert s["epsilon"] == pytest.approx(_epsilon([3, 3]))
    assert s["epsilon"] > _epsilon([M, M])


def test_a_survivor_vanishing_before_its_keys_keeps_its_input_via_seed_shares(monkeypatch) -> None:
    # t = 3 at M = 4, privacy.colluders: 0 declared: t + max(t, 2) > M, so honest parties may reveal seed shares in
    # mode semi-honest (undeclared, c = t - 1 = 2: quorum 4, the 3 left refuse and the round aborts)
    res, transport = _run("pbm-audited", "party2@0:2/query.secagg_unmask", monkeypatch, epochs=1, threshold=3,
                          privacy={"colluders": 0})
    (rec,) = res.summary["dropouts"]
    assert rec["party"] == "party2" and rec["contributed"] == ["party0", "party1", "party2", "party3"]
    _check_recovered_sum(transport, "train:0:2", [1, 2, 3, 4])
    shares = [w for w in transport.wires if w.kind == "query.secagg_reveal_shares"]
    assert shares and all(w.round == "recovery:0:2" for w in shares)


def test_a_survivor_vanishing_during_recovery_fails_the_round(monkeypatch) -> None:
    """party1 was listed as a survivor; honest parties never reveal its pair keys (that would open
    its input, see test_secagg_malicious), and its pair masks with the dropped party2 cannot be
    rebuilt from seed shares: the round fails, naming it, instead of opening an input."""
    with pytest.raises(PartyFailure) as info:
        _run("pbm-audited", "party2@0:2,party1@recovery:0:2/query.secagg_unmask", monkeypatch, epochs=1)
    assert info.value.round == "train:0:2" and "vanished before unmasking" in str(info.value)


def test_without_secagg_skip_party_simply_goes_on(monkeypatch) -> None:
    res, _ = _run("npq", "party2@0:5,party0@eval:1:0", monkeypatch)
    s = res.summary
    assert [(r["party"], r["epoch"], r["step"], r["phase"]) for r in s["dropouts"]] == [
        ("party2", 0, 5, "train"), ("party0", 1, 0, "eval")]
    assert s["dropouts"][1]["contributed"] == ["party1", "party3"]
    assert s["recovery_bytes"] == 0 and s["final_test_acc"] is not None


def test_fail_raises_party_failure_naming_party_and_round(monkeypatch) -> None:
    with pytest.raises(PartyFailure) as info:
        _run("pbm-audited", "party2@0:2", monkeypatch, on_dropout="fail")
    assert (info.value.party, info.value.round) == ("party2", "train:0:2") and "died" in str(info.value)


def test_fail_via_cli_exits_1(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv(FAULT_ENV, "party1@0:3")
    code = main(["run", "demo", "--out", str(tmp_path / "run"), "--transport", "inprocess", "--no-progress",
                 "--set", "train.epochs=1"])
    assert code == 1
    assert "party party1 failed in round train:0:3" in capsys.readouterr().err


def test_skip_party_needs_additive_fusion() -> None:
    cfg = load_run_config({"strategy": "npq", "num_parties": M, "model": {"fusion": "concat"},
                           "train": {"on_dropout": "skip-party"}})
    with pytest.raises(ConfigError) as info:
        Engine(cfg, InProcessTransport(), BlobSource(num_parties=M), progress=False).run()
    assert info.value.key == "train.on_dropout"


def test_no_private_key_seed_or_pair_secret_ever_crosses_the_wire(monkeypatch) -> None:
    """The old design Shamir-shared the X25519 private key and rebuilt it on a dropout (then every
    past round of the party opened). Now no long-lived secret appears in any message, recovery
    rounds included: only round keys and, for a vanished survivor, shares of its seed."""
    # a dropout, then a vanished survivor recovered from 2 seed shares: mode malicious (t = 2, M = 4, no colluder
    # declared: 2 holders reach max(t, 2); undeclared, c = 1, they would not)
    res, transport = _run("pbm-audited", "party2@0:2,party1@0:4/query.secagg_unmask", monkeypatch, epochs=1,
                          secagg_mode="malicious", privacy={"colluders": 0})
    assert {w.round.split(":")[0] for w in transport.wires} >= {"setup", "train", "recovery", "eval"}
    clients = [transport.nodes[p].client for p in range(1, M + 1)]
    secrets = [private_key_bytes(c._key) for c in clients] + [c._seed for c in clients]
    secrets += [pair.mask_secret for c in clients for pair in c._pairs.values()]
    blob = b"".join(w.data for w in transport.wires)
    assert len(secrets) == 2 * M + M * (M - 1) and not any(s in blob for s in secrets)


def test_curious_server_on_the_wire_bytes_learns_nothing() -> None:
    row = run_one(5, round_r=2, seed=3)
    assert row["survivor_sum_exact"] and row["late_vector_refused_by_server"]
    assert row["past_rounds_unmasked"] == row["late_vector_unmasked"] == row["single_survivor_unmasked"] == 0
    assert row["past_rounds_tried"] == 2 and row["single_survivors_tried"] == 4


def test_at_the_default_threshold_a_vanished_survivor_fails_the_round_instead_of_opening_seed_shares(
        monkeypatch) -> None:
    """M = 4, t = 2: t + max(t, 2) = M, so a server telling split survivor sets could rebuild a seed whose
    pair keys it also holds (vfl.attacks.secagg.lying.split_rebuild); the honest server does not ask for shares."""
    with pytest.raises(PartyFailure) as info:
        _run("pbm-audited", "party2@0:2/query.secagg_unmask", monkeypatch, epochs=1)
    assert info.value.round == "train:0:2" and "seed shares are off" in str(info.value)


def test_colluders_reach_the_seed_share_rule(monkeypatch) -> None:
    """t = 3, M = 4 recovers a vanished survivor with no colluder declared (above); with privacy.colluders = 2
    (or undeclared: t - 1 = 2), 3 + max(3, 2, 4) = M + c: off."""
    with pytest.raises(PartyFailure, match="seed shares are off"):
        _run("pbm-audited", "party2@0:2/query.secagg_unmask", monkeypatch, epochs=1, threshold=3, privacy={"colluders": 2})
