"""``privacy.bottom_dp`` end to end (inprocess): pbm and ldp runs report an end-to-end ε larger than
the release-only ε of the same run, and a resumed run with seeded noise replays the uninterrupted one."""

from __future__ import annotations

import json
import math

import pytest

import strategies  # noqa: F401
from simulations.cli.runner import execute, resolve_config
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.privacy import SCOPE_END_TO_END, SCOPE_GAUSSIAN, SCOPE_PBM
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")

DP = "privacy.bottom_dp={noise_multiplier: 1.0, max_grad_norm: 1.0}"
TINY = ["transport.kind=inprocess", "train.epochs=2", "data.train_subsample=400", "data.test_subsample=200"]


def _digits(strategy: str, tmp_path, *extra: str):
    params = ["params.b=16", "params.beta=0.25"] if strategy == "pbm" else ["params={}"]
    cfg = resolve_config("digits-5p", [*TINY, f"strategy={strategy}", *params, *extra])
    out = tmp_path / f"{strategy}-{len(extra)}"
    summary = execute(cfg, out_dir=out, progress=False).summary
    on_disk = json.loads((out / "summary.json").read_text())
    lines = RunDir(out).read_metrics()
    return summary, on_disk, lines


@pytest.mark.parametrize(("strategy", "release_scope"), [("pbm", SCOPE_PBM), ("ldp", SCOPE_GAUSSIAN)])
def test_bottom_dp_reports_an_end_to_end_epsilon(strategy, release_scope, tmp_path):
    plain, plain_disk, plain_lines = _digits(strategy, tmp_path)
    dp, dp_disk, dp_lines = _digits(strategy, tmp_path, DP)
    assert plain_disk["epsilon_scope"] == release_scope and [r["epsilon_scope"] for r in plain_lines] == [release_scope] * 2
    assert dp_disk["epsilon_scope"] == SCOPE_END_TO_END and [r["epsilon_scope"] for r in dp_lines] == [SCOPE_END_TO_END] * 2
    assert math.isfinite(dp["epsilon"]) and dp["epsilon"] > plain["epsilon"] > 0
    assert dp_disk["epsilon"] == dp["epsilon"]
    assert dp_lines[0]["epsilon"] < dp_lines[1]["epsilon"]  # it composes over epochs
    assert dp["final_test_acc"] is not None


class Killed(Exception):
    pass


def _cfg():
    return load_run_config({"strategy": "pbm", "num_parties": 3, "seed": 3,
                            "train": {"epochs": 3, "batch_size": 32, "lr": 0.05, "optimizer": "adam"},
                            "privacy": {"noise_rng": "seeded", "bottom_dp": {"noise_multiplier": 0.7,
                                                                             "max_grad_norm": 0.5}}})


def _run(path, *, resume=False, kill_after=None):
    def cb(epoch, record, engine):
        if kill_after is not None and epoch == kill_after:
            raise Killed()

    run_dir = RunDir(path)
    if not resume:
        run_dir.write_config(_cfg().to_dict())
    engine = Engine(_cfg(), InProcessTransport(), BlobSource(num_parties=3), run_dir=run_dir, progress=False,
                    on_epoch_end=cb)
    return engine.run(resume=resume)


def test_resume_with_seeded_dp_sgd_noise_replays_the_uninterrupted_run(tmp_path):
    full = _run(tmp_path / "full")
    with pytest.raises(Killed):
        _run(tmp_path / "cut", kill_after=0)
    resumed = _run(tmp_path / "cut", resume=True)
    lines = RunDir(tmp_path / "cut").read_metrics()
    assert [r["epoch"] for r in lines] == [0, 1, 2]
    keys = ("train_loss", "train_acc", "test_acc", "bytes_up", "epsilon", "rdp_order", "epsilon_scope")
    for a, b in zip(full.history, lines, strict=True):
        for k in keys:
            assert a[k] == b[k], (k, a[k], b[k])
    assert resumed.summary["epsilon"] == full.summary["epsilon"]
    assert resumed.summary["epsilon_scope"] == SCOPE_END_TO_END
