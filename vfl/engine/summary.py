"""summary.json of an engine run: traffic, ε and its scope, recovery, the hash chain's head, the label ε over
every epoch attempt, and the strategy's end-of-run extras (``Engine._party_reports``)."""

from __future__ import annotations

from typing import Any

from vfl.privacy.defenses import label_privacy, make_defenses
from vfl.runtime.auth import auth_summary
from vfl.runtime.ledger import setup_breakdown


def run_summary(engine: Any, history: list[dict[str, Any]]) -> dict[str, Any]:
    """summary.json's dict of a run whose rows are ``history``."""
    cfg = engine.cfg
    last = history[-1] if history else {}
    tot = engine.ledger.totals("train")
    setup = engine.ledger.totals("setup")
    summary: dict[str, Any] = {
        "name": cfg.name, "strategy": cfg.strategy, "dataset": cfg.dataset, "num_parties": cfg.num_parties,
        "transport": engine.transport.kind, "epochs": len(history) and history[-1]["epoch"] + 1,
        "final_train_loss": last.get("train_loss"), "final_train_acc": last.get("train_acc"),
        "final_test_acc": last.get("test_acc"), **test_acc_epochs(history),
        "total_bytes_up": tot["bytes_up"], "total_bytes_down": tot["bytes_down"],
        "payload_bytes_up": tot["payload_up"], "payload_bytes_down": tot["payload_down"],
        "envelope_bytes_up": tot["bytes_up"] - tot["payload_up"],
        "envelope_bytes_down": tot["bytes_down"] - tot["payload_down"],
        "messages_up": tot["messages_up"], "messages_down": tot["messages_down"],
        "envelope_bytes_per_message": (
            (tot["bytes_up"] + tot["bytes_down"] - tot["payload_up"] - tot["payload_down"])
            / max(1, tot["messages_up"] + tot["messages_down"])),
        "setup_bytes": setup["bytes_up"] + setup["bytes_down"],
        **setup_breakdown(engine.ledger), **auth_summary(engine.ledger, enabled=cfg.auth),
        "eval_bytes": sum(engine.ledger.totals("eval")[k] for k in ("bytes_up", "bytes_down")),
        "bytes_per_party": engine.ledger.per_party("train"),
        "bytes_by_kind": dict(sorted(engine.ledger.by_kind.items())),
        "bytes_by_kind_direction": dict(sorted(engine.ledger.by_kind_direction.items())),
        "wall_s": last.get("wall_s"),
    }
    if "test_auprc" in last:
        summary["final_test_auprc"] = last["test_auprc"]
    if engine.accountant is not None:
        # from the accountant, not the last row: a resume may have charged releases since
        summary.update({"epsilon": engine.accountant.epsilon(cfg.privacy.delta)[0], "delta": cfg.privacy.delta,
                        "epsilon_scope": engine.accountant.scope()})
        if engine.accountant.labels_only():  # the strategy's own mechanism protects labels (trees' label DP)
            summary.update({"epsilon_label": summary["epsilon"], "delta_label": cfg.privacy.delta,
                            "epsilon_label_scope": summary["epsilon_scope"]})
    from vfl.privacy.accounting.noise_report import noise_fields

    summary.update(noise_fields(cfg.privacy.noise_rng, accounted=engine.accountant is not None,
                                caveats=engine.strategy.epsilon_caveats(), colluders=cfg.privacy.colluders or 0,
                                assumptions=engine.strategy.epsilon_assumptions()))
    summary.update(engine.recovery.summary())
    if engine.run_dir is not None and engine.releases.records:  # the hash chain's head: `vfl verify` checks it
        summary["privacy_ledger_head"] = engine.releases.head
    if engine.stopped is not None:
        summary["stopped"] = engine.stopped
    if engine.grid is not None:
        extras = engine.extras if engine.extras is not None else engine.strategy.summary_extra(engine.grid)
        summary.update(extras)
        summary.update(engine._label_privacy())
    return summary

def label_charge(engine: Any) -> dict[str, Any]:
    """The defenses and the label ε over every epoch attempt: each restart or resume may have redone one
    epoch whose failed attempt already sent label-noised gradients (fresh noise), so it is charged one more.
    The write-ahead ledger's attempts count too: a resume or restart whose record no checkpoint kept
    (a second crash in the same epoch) left its attempt there."""
    attempts = [r.epoch for r in engine.releases.releases() if r.fresh]
    cfg = engine.cfg
    redone = max(len(engine.recovery.restarts) + len(engine.recovery.resumes), len(attempts) - len(set(attempts)))
    out = label_privacy(cfg.defenses, epochs=cfg.train.epochs + redone, delta=cfg.privacy.delta)
    if redone and "epsilon_label" in out:
        out["label_epochs_charged"] = cfg.train.epochs + redone
    # a restore to a state before any checkpoint (resume without one, restart to the start snapshot) gives a
    # server that draws its randomized labels (site labels, drawn at first use) again: one more draw each
    redrawn = sum(r.get("checkpoint_epoch") is None and r.get("epoch") != -1  # (-1: a set-up restart, no draw yet)
                  for r in engine.releases.restores)
    drawn = sum(d.label_epsilon() or 0.0 for d in make_defenses(cfg.defenses) if d.site == "labels")
    if redrawn and drawn and "epsilon_label" in out:
        out["epsilon_label"] += redrawn * drawn
        out["label_draws_charged"] = 1 + redrawn
    return out


def test_acc_epochs(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Which epoch (1-based, as printed) ``final_test_acc`` is from, and the best epoch's test accuracy."""
    acc = [(int(r["epoch"]) + 1, float(r["test_acc"])) for r in history if r.get("test_acc") is not None]
    if not acc:
        return {}
    best = max(acc, key=lambda e: e[1])  # the first of equal values
    final = {"final_test_acc_epoch": acc[-1][0]} if history[-1].get("test_acc") is not None else {}
    return {**final, "best_test_acc": best[1], "best_test_acc_epoch": best[0]}

