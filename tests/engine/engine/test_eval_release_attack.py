"""Evaluation forwards count against each party's own cap: the attack played as the server.

The server node answers every training step with its gradient AND an evaluation forward request of its own
(a fresh round each time) for the test batch that holds test sample 0. Each party answers an evaluation
forward with a noised embedding of its test rows: a release of those samples. Control: the old guard,
which counted training forwards only (``old_admit``), answers them all (3 epochs: 27 extra releases of test
sample 0 beside the 3 honest evaluations, none counted or reported). Now the party counts them per test
sample and refuses the forward past its cap (``ReleaseRefused``, phase ``eval``), and reports the count
(``eval_releases_max``)."""

from __future__ import annotations

import pytest

from parties.vertical import wire as vw
from parties.vertical.party import ActiveServer, step_config
from parties.vertical.release_guard import ReleaseGuard, release_cap
from tests.support.release_audit import ReleaseAudit
from tests.support.release_runs import STEPS, engine_at, run, tiny_cfg
from vfl.core.errors import ReleaseRefused
from vfl.runtime import message as wire
from vfl.runtime.message import BROADCAST


def old_admit(self, ids, *, epoch, step, phase="train"):
    """Before: evaluation forwards were not counted."""
    if phase == "train":
        real_admit(self, ids, epoch=epoch, step=step)


real_admit = ReleaseGuard.admit


def lying_server(mp):
    """Each training step's replies also carry an evaluation forward request for test step 0 (a fresh round)."""
    real, calls = ActiveServer.train_step, [0]

    def train_step(node, messages, epoch, step):
        out = real(node, messages, epoch, step)
        calls[0] += 1
        if calls[0] % node.schedule.steps == 0:  # the last step of an epoch: the driver expects silence after it
            return out
        f = 2000 + calls[0]
        ask = wire.make(vw.Kind.EVAL_FORWARD, src=node.node_id, dst=BROADCAST, round=wire.round_tag(f, 0, "eval"),
                        content=wire.records(**{vw.Record.STEP: step_config(epoch=f, step=0, forward=True)}))
        return [*out, ask]

    mp.setattr(ActiveServer, "train_step", train_step)


@pytest.mark.parametrize("control", [False, True], ids=["counted", "control-old-guard"])
@pytest.mark.parametrize("strategy", ["ldp", "pbm"])  # (pbm without SecAgg: a masked round cannot be interleaved)
def test_a_server_asking_for_evaluation_forwards_gets_at_most_the_cap(tmp_path, monkeypatch, strategy, control):
    if control:
        monkeypatch.setattr(ReleaseGuard, "admit", old_admit)
    audit = ReleaseAudit().attach(monkeypatch)
    lying_server(monkeypatch)
    cfg = tiny_cfg(strategy, params={"secagg": False} if strategy == "pbm" else None)
    cap = release_cap(cfg)
    if control:
        engine = run(tmp_path / "run", cfg)
    else:
        engine = engine_at(tmp_path / "run", cfg)
        with pytest.raises(ReleaseRefused, match=r"refused the evaluation forward of round eval:\d+:0: its test "
                                                 rf"sample 0 was already released {cap} time\(s\)") as err:
            engine.run()
        assert err.value.phase == "eval" and err.value.sample == 0
    rounds = {(e, src) for ph, e, s, src, _ in audit.arrivals if ph == "eval" and s == 0}
    per_party = max(sum(1 for _, p in rounds if p == src) for _, src in rounds)  # test sample 0's releases
    grid = engine.grid
    reports = [engine.transport.call(grid.group_of[p], p, "release_report") for p in grid.party_ids]
    if control:
        assert per_party == cfg.train.epochs * (STEPS - 1) + cfg.train.epochs > cap  # 27 asked + 3 honest ones
        assert max(r["releases_max"] for r in reports) == cfg.train.epochs  # and the party reports 3
    else:
        assert per_party == cap
        assert max(r["eval_releases_max"] for r in reports) == cap == max(r["releases_max"] for r in reports)
