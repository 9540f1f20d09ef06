"""Automatic restart over Ray charges the releases of the failed attempt (write-ahead ledger).

A party's actor is killed while a step of epoch 1 is in flight; the engine restarts every host
from the epoch-0 checkpoint and redoes epoch 1 with fresh (crypto) noise, so the server decodes
the batches the failed attempt reached twice. The reported ε is the ε of the releases counted on
the wire (the server's gradient replies in the hosts' logs); the control is the ε the old restore
printed (the checkpoint's accountant alone: one release per epoch)."""

from __future__ import annotations

import threading

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from tests.support.release_ledger import decoded_rounds, pbm_epsilon, worst_sample_releases
from tests.support.wire_tap import WireTap
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.privacy.accounting.wal import LEDGER_FILE, ReleaseLedger
from vfl.runtime.transport.ray_transport import RayTransport

pytestmark = [pytest.mark.ray]


def test_restart_charges_the_failed_attempt(ray_local, tmp_path):
    cfg = load_run_config({
        "num_parties": 3, "seed": 2, "strategy": "pbm", "params": {"b": 8, "secagg": True},
        "train": {"epochs": 2, "batch_size": 8, "lr": 0.05},  # 30 steps: a sync point at 16
        "transport": {"kind": "ray", "parties_per_actor": 1, "cpus_per_actor": 0.1},
        "privacy": {"noise_rng": "crypto"}})
    tap = WireTap()
    transport = tap.attach(RayTransport(), hops_visible=False)
    real_restart = RayTransport.restart.__get__(transport)

    def restart(states, **kw):  # the tap's own wrapper predates restart's keyword arguments
        rows = real_restart(states, **kw)
        tap.rows.extend(rows)  # what the live hosts (the server among them) sent before the restart
        return rows

    transport.restart = restart
    fired: list[threading.Timer] = []

    def on_step(epoch, done, engine):
        if (epoch, done) == (1, 16) and not fired:  # kill with the next steps already chained
            fired.append(threading.Timer(0.02, transport.kill, args=("parties-1",)))
            fired[0].start()

    run_dir = RunDir(tmp_path / "run")
    run_dir.write_config(cfg.to_dict())
    try:
        result = Engine(cfg, transport, BlobSource(num_parties=3), run_dir=run_dir, progress=False,
                        on_step=on_step).run()
    finally:
        for t in fired:
            t.join()
        transport.shutdown()
    summary = result.summary
    (restart,) = summary["restarts"]
    assert restart["epoch"] == 1 and restart["releases_charged"] == 1 and restart["charged_epochs"] == [1]
    released = worst_sample_releases(decoded_rounds([tap], use_rows=True))
    assert released == cfg.train.epochs + 1  # the batches reached before the kill were decoded twice
    assert summary["epsilon"] == pytest.approx(pbm_epsilon(cfg, released), rel=1e-12)
    old = pbm_epsilon(cfg, cfg.train.epochs)  # control: what the checkpoint's accountant alone printed
    assert old < summary["epsilon"]
    ledger = ReleaseLedger(tmp_path / "run" / LEDGER_FILE)
    assert [(r.seq, r.epoch) for r in ledger.releases()] == [(1, 0), (2, 1), (3, 1)]
    assert [(r["reason"], r["checkpoint_epoch"], r["charged"]) for r in ledger.restores] == [("restart", 0, [2])]
