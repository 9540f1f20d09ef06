"""Checkpoints inside an epoch (``train.checkpoint_every_steps``): what the engine keeps of the epoch in
progress, so a resume (or a restart) goes on after the last checkpointed step exactly as the run would have.

A mid-epoch checkpoint is ``checkpoints/step_EEEEE_KKKKKKK/`` (epoch E, after its K-th step;
``vfl/engine/checkpoint.py``) and holds, besides what an epoch's checkpoint holds (every node's state, the
cumulative byte ledger, the accountant, the driver's state), the epoch's byte counters so far and its
training seconds so far (``vfl/engine/recovery.py:MidEpoch``). The nodes' states must hold what they sum over an epoch (the
label holder's loss and accuracy sums, a model server's observation log): a strategy says it does with
``Strategy.step_checkpoints``. Privacy: the accountant saved is the one before the epoch, and the
write-ahead release it covers is the one before the epoch's record, so a resume charges the epoch's
releases again (its steps after the checkpoint are redone, with fresh noise unless ``noise_rng: seeded``):
an over-count of at most one epoch, never an under-count.
"""

from __future__ import annotations

from typing import Any

from vfl.engine.recovery import MidEpoch, Snapshot


def save_mid_epoch(engine: Any, epoch: int, done: int, *, covered: int, train_s: float, wall_s: float) -> None:
    """The checkpoint after ``done`` steps of ``epoch`` (in ``engine.run_dir``, and the snapshot a restart
    returns to): the nodes' and the driver's state, the epoch's byte counters and training seconds so far,
    the last committed epoch's row; the accountant before this epoch and ``covered``, the write-ahead
    release before its record (so a resume charges this epoch's releases once more)."""
    import json

    nodes = engine.transport.get_state()
    ledger = json.loads(json.dumps(engine.ledger.state()))
    accountant = engine.accountant.to_json() if engine.accountant is not None else None
    mid = MidEpoch(epoch, done, {"driver": engine.strategy.driver_state(), "epoch_ledger": engine.ledger.epoch_state(),
                                 "epoch_train_s": train_s})
    if engine.run_dir is not None:
        engine._save_views()
        engine.run_dir.save_checkpoint(epoch - 1, nodes, {
            "epoch": epoch - 1, "step": done, "ledger": ledger, "wall_s": wall_s, "accountant": accountant,
            "privacy_ledger_seq": covered, "recovery": engine.recovery.state(), "record": engine._last_record,
            "driver": mid.driver, **mid.engine_fields()}, step=done)
    if engine.recovery.enabled:
        engine.snapshot = Snapshot(epoch - 1, nodes, ledger, accountant, covered=covered, mid=mid, driver=mid.driver)
