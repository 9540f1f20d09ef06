"""Every release is charged, the failed attempt's included (write-ahead privacy ledger).

Play the server: a party dies mid-epoch (``VFL_FAULT_INJECT``), the run is resumed from its
checkpoint and redoes the epoch. With crypto noise the server now holds two independently
noised sums of the same batches; averaging them halves its reconstruction error. The reported ε
must be the ε of the releases the server decoded, counted on the wire over both processes.
Control: without the ledger (the old restore: the checkpoint's accountant alone) the reported ε
is that of fewer releases than the server received."""

from __future__ import annotations

import json

import numpy as np
import pytest

import strategies  # noqa: F401
from parties.vertical.party import ActiveServer, PassiveParty
from tests.support.helpers import BlobSource
from tests.support.release_ledger import decoded_rounds, pbm_epsilon, worst_sample_releases
from tests.support.wire_tap import WireTap
from vfl.core.errors import PartyFailure
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.privacy.accounting.wal import LEDGER_FILE, ReleaseLedger
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.message import round_of
from vfl.runtime.transport.inprocess import InProcessTransport

SOURCE = BlobSource(num_parties=3, num_train=240, num_test=60)


def _cfg(noise_rng="crypto"):
    return load_run_config({"num_parties": 3, "seed": 4, "strategy": "pbm", "params": {"b": 8},
                            "model": {"embed_dim": 8, "bottom_hidden": [16], "head_hidden": [16]},
                            "train": {"epochs": 3, "batch_size": 24, "lr": 0.05},  # 10 steps an epoch
                            "privacy": {"noise_rng": noise_rng}})


class Spy:
    """What the server decoded and what the parties really embedded, per process and round."""

    def __init__(self):
        self.process = 0
        self.decoded: dict[tuple[int, str], np.ndarray] = {}
        self.truth: dict[tuple[int, str], np.ndarray] = {}
        self.first_send_ledger: dict[tuple[int, str], list[dict]] = {}

    def attach(self, mp, path):
        real_fuse, real_send = ActiveServer.fuse, PassiveParty._send

        def fuse(node, messages):
            out = real_fuse(node, messages)
            rnd = round_of(messages[0])
            if rnd.startswith("train:"):
                self.decoded[(self.process, rnd)] = out.detach().numpy().copy()
            return out

        def send(node, request, emb, phase, epoch, step):
            key = (self.process, f"{phase}:{epoch}:{step}")
            if phase == "train":
                self.truth[key] = self.truth.get(key, 0) + emb.detach().numpy().astype(np.float64)
                if key not in self.first_send_ledger:  # what is on disk when the first release leaves
                    f = path / LEDGER_FILE
                    self.first_send_ledger[key] = ([json.loads(x) for x in f.read_text().splitlines()]
                                                   if f.exists() else [])
            return real_send(node, request, emb, phase, epoch, step)

        mp.setattr(ActiveServer, "fuse", fuse)
        mp.setattr(PassiveParty, "_send", send)


def _engine(path, cfg, tap, *, resume):
    run_dir = RunDir(path)
    if not resume:
        run_dir.write_config(cfg.to_dict())
    transport = tap.attach(InProcessTransport(), hops_visible=True)
    return Engine(cfg, transport, SOURCE, run_dir=run_dir, progress=False)


def _killed_then_resumed(path, monkeypatch, *, fault, noise_rng="crypto", drop_ledger=False, spy=None):
    """Run until ``fault`` kills a party, then resume in a fresh engine; returns (summary, taps)."""
    cfg = _cfg(noise_rng)
    taps = [WireTap(), WireTap()]
    with monkeypatch.context() as mp:
        if spy is not None:
            spy.attach(mp, path)
        mp.setenv(FAULT_ENV, fault)
        with pytest.raises(PartyFailure):
            _engine(path, cfg, taps[0], resume=False).run()
        mp.delenv(FAULT_ENV)
        if drop_ledger:  # the old restore: nothing but the checkpoint's accountant
            (path / LEDGER_FILE).unlink()
        if spy is not None:
            spy.process = 1
        result = _engine(path, cfg, taps[1], resume=True).run(resume=True)
    return cfg, result.summary, taps


@pytest.mark.parametrize("fault,ckpt_epoch", [("party1@1:6", 0), ("party1@0:3", None)],
                         ids=["mid-epoch-1", "before-any-checkpoint"])
def test_resume_charges_the_failed_attempt(tmp_path, monkeypatch, fault, ckpt_epoch):
    cfg, summary, taps = _killed_then_resumed(tmp_path / "run", monkeypatch, fault=fault)
    count = decoded_rounds(taps, use_rows=False)
    released = worst_sample_releases(count)
    assert released == cfg.train.epochs + 1  # the batches the failed attempt reached went out twice
    assert summary["epsilon"] == pytest.approx(pbm_epsilon(cfg, released), rel=1e-12)
    (resume,) = summary["resumes"]
    assert resume["checkpoint_epoch"] == ckpt_epoch and resume["releases_charged"] == 1
    assert resume["charged_epochs"] == [int(fault.split("@")[1].split(":")[0])]
    assert summary["restarts"] == []
    rows = RunDir(tmp_path / "run").read_metrics()
    assert rows[-1]["epsilon"] == summary["epsilon"]  # the row of the last epoch says the same


def test_server_averaging_the_repeats_gains_and_the_old_restore_hid_it(tmp_path, monkeypatch, capsys):
    # control: the old restore (no ledger) reports the epsilon of fewer releases than were decoded
    cfg, old, taps = _killed_then_resumed(tmp_path / "old", monkeypatch, fault="party1@1:6", drop_ledger=True)
    released = worst_sample_releases(decoded_rounds(taps, use_rows=False))
    assert released == cfg.train.epochs + 1
    assert old["epsilon"] == pytest.approx(pbm_epsilon(cfg, cfg.train.epochs), rel=1e-12)
    assert old["epsilon"] < pbm_epsilon(cfg, released)
    assert "privacy_ledger.jsonl ends at release 0 but the checkpoint covers 1" in capsys.readouterr().err

    # the attack: the server averages the two decoded sums of each repeated batch
    spy = Spy()
    cfg, new, taps = _killed_then_resumed(tmp_path / "new", monkeypatch, fault="party1@1:6", spy=spy)
    repeated = sorted(r for (p, r) in spy.decoded if p == 0 and (1, r) in spy.decoded and r.startswith("train:1:"))
    assert repeated == [f"train:1:{s}" for s in range(6)]
    np.testing.assert_array_equal(spy.truth[(0, "train:1:0")], spy.truth[(1, "train:1:0")])  # same input twice
    single = np.mean([np.mean((spy.decoded[(1, r)] - spy.truth[(1, r)]) ** 2) for r in repeated])
    averaged = np.mean([np.mean(((spy.decoded[(0, r)] + spy.decoded[(1, r)]) / 2
                                 - (spy.truth[(0, r)] + spy.truth[(1, r)]) / 2) ** 2) for r in repeated])
    assert averaged < 0.75 * single  # ~1/2: two independent noise draws of the same batch
    assert new["epsilon"] == pytest.approx(pbm_epsilon(cfg, cfg.train.epochs + 1), rel=1e-12)

    # write-ahead: when a party sent its first embedding of an attempt, the release was on disk
    for (process, rnd), records in spy.first_send_ledger.items():
        _, epoch, _ = rnd.split(":")
        attempts = 1 + (process == 1 and epoch == "1")  # epoch 1 is in its second attempt after the resume
        assert sum(r["record"] == "release" and r["epoch"] == int(epoch) for r in records) == attempts, (process, rnd)
    ledger = ReleaseLedger(tmp_path / "new" / LEDGER_FILE)
    assert [(r.seq, r.epoch) for r in ledger.releases()] == [(1, 0), (2, 1), (3, 1), (4, 2)]
    assert [(r["reason"], r["charged"]) for r in ledger.restores] == [("resume", [2])]


def test_seeded_noise_repeats_the_same_release_and_charges_nothing(tmp_path, monkeypatch):
    spy = Spy()
    cfg, summary, taps = _killed_then_resumed(tmp_path / "run", monkeypatch, fault="party1@1:6", noise_rng="seeded",
                                              spy=spy)
    for s in range(6):  # the server decodes exactly the same sums again: nothing new is released
        np.testing.assert_array_equal(spy.decoded[(0, f"train:1:{s}")], spy.decoded[(1, f"train:1:{s}")])
    assert summary["resumes"][0]["releases_charged"] == 0
    assert summary["epsilon"] == pytest.approx(pbm_epsilon(cfg, cfg.train.epochs), rel=1e-12)


def test_the_report_of_a_killed_run_counts_the_failed_attempt(tmp_path, monkeypatch):
    from simulations.report.run import load_run

    cfg = _cfg()
    monkeypatch.setenv(FAULT_ENV, "party1@1:6")
    with pytest.raises(PartyFailure):
        _engine(tmp_path / "run", cfg, WireTap(), resume=False).run()
    acc = load_run(tmp_path / "run").accountant  # epoch 0 committed, epoch 1 released in part
    assert acc.epsilon(cfg.privacy.delta)[0] == pytest.approx(pbm_epsilon(cfg, 2), rel=1e-12)
    (tmp_path / "run" / LEDGER_FILE).unlink()  # control: the checkpoint alone (what the report read before)
    old = load_run(tmp_path / "run").accountant
    assert old.epsilon(cfg.privacy.delta)[0] == pytest.approx(pbm_epsilon(cfg, 1), rel=1e-12)


def test_a_dropout_amends_the_release_on_disk_before_the_epoch_commits(tmp_path, monkeypatch):
    cfg = load_run_config({"num_parties": 4, "seed": 1, "strategy": "pbm", "params": {"b": 8},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 1, "batch_size": 50, "on_dropout": "skip-party"}})
    monkeypatch.setenv(FAULT_ENV, "party2@0:2")  # party2 drops out: from round 2 on, 3 binomials are summed
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_config(cfg.to_dict())
    seen: list[tuple[int, ...]] = []

    def on_step(epoch, done, engine):  # still inside the attempt: nothing committed yet
        assert not (tmp_path / "run" / "checkpoints").exists()
        seen.append(tuple(e.num_parties for r in ReleaseLedger(tmp_path / "run" / LEDGER_FILE).releases()
                          for e in r.events))

    result = Engine(cfg, InProcessTransport(), BlobSource(num_parties=4, num_train=300), run_dir=run_dir,
                    progress=False, on_step=on_step).run()
    assert [d["party"] for d in result.summary["dropouts"]] == ["party2"]
    assert seen and set(seen) == {(3,)}  # a failure from here on would charge the costlier 3-party release
    assert result.summary["epsilon"] == pytest.approx(pbm_epsilon(cfg, 1, num_parties=3), rel=1e-12)


def test_vfl_run_resume_lists_the_resume_and_charges_it(tmp_path, monkeypatch, capsys):
    from simulations.cli.main import main

    out = tmp_path / "run"
    fast = ["--no-progress", "--transport", "inprocess", "--set", "params.b=8", "--set", "data.train_subsample=256",
            "--set", "data.test_subsample=64", "--set", "train.epochs=2"]  # 4 steps an epoch
    monkeypatch.setenv(FAULT_ENV, "party1@1:2")
    assert main(["run", "demo", "--out", str(out), *fast]) == 1
    assert "resume with: vfl run --resume" in capsys.readouterr().err
    monkeypatch.delenv(FAULT_ENV)
    assert main(["run", "--resume", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    (resume,) = summary["resumes"]
    assert resume["checkpoint_epoch"] == 0 and resume["releases_charged"] == 1 and resume["time"].endswith("Z")
    cfg = load_run_config({"strategy": "pbm", "num_parties": summary["num_parties"], "params": {"b": 8},
                           "model": {"embed_dim": 16}})  # the demo's PBM settings (b overridden)
    assert summary["epsilon"] == pytest.approx(pbm_epsilon(cfg, 3), rel=1e-12)  # 2 epochs + the failed attempt
