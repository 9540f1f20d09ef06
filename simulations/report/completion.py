"""Run-level model completion (Fu et al., USENIX Security 2022): a passive party's own trained bottom
plus a few known labels -> everyone's label. Passive: any party of any run; active: the party that
trained with the malicious local optimizer (``attack.amc_party``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from simulations.report import intervals
from simulations.report.results import RUN_ATTACKS, AttackResult
from simulations.report.run import RunArtifacts, Skipped
from vfl.attacks.model_completion import (
    completion_accuracy,
    completion_predictions,
    known_label_ids,
)
from vfl.core.rng import seeded_numpy

PER_CLASS = 4  # known labels per class: 40 on a 10-class task (Fu et al. use 40 on CIFAR-10)
MAX_EVAL = 2000  # scored samples (a seeded subset beyond that: one forward pass of the bottom each)


def _own_outputs(run: RunArtifacts, party: int, x: np.ndarray) -> np.ndarray:
    """The party's bottom (its own final state) on its own features."""
    with torch.no_grad():
        return run.model.bottoms[party](torch.as_tensor(np.asarray(x, np.float32))).double().numpy()  # type: ignore[no-any-return]


def complete(run: RunArtifacts, party: int) -> dict[str, Any]:
    """Completion accuracy of ``party`` on the training samples it holds no label of (and on the test
    set), beside the same head fitted on its raw features; known labels: ``PER_CLASS`` per class;
    ``hits`` and ``raw_hits``: each scored sample right (1) or not, for the paired interval."""
    shards, labels = run.parts
    y, k = labels.y_train, int(labels.num_classes)
    rng = seeded_numpy("report-completion", run.cfg.seed)
    known = known_label_ids(y=y, per_class=PER_CLASS, rng=rng)
    rest = np.setdiff1d(np.arange(len(y)), known)
    rest = np.sort(rng.choice(rest, size=min(MAX_EVAL, len(rest)), replace=False))
    test = np.sort(rng.choice(len(labels.y_test), size=min(MAX_EVAL, len(labels.y_test)), replace=False))
    x, xt = shards[party].x_train, shards[party].x_test[test]
    ids = np.concatenate([known, rest])
    emb, emb_t = _own_outputs(run, party, x[ids]), _own_outputs(run, party, xt)
    flat = x[ids].reshape(len(ids), -1)
    kn, ev = np.arange(len(known)), np.arange(len(known), len(ids))  # rows of emb / flat
    seed = run.cfg.seed + party
    hits = (completion_predictions(known_x=emb[kn], known_y=y[known], eval_x=emb[ev], num_classes=k, seed=seed)
            == y[rest]).astype(float)
    raw_hits = (completion_predictions(known_x=flat[kn], known_y=y[known], eval_x=flat[ev], num_classes=k, seed=seed)
                == y[rest]).astype(float)
    return {"accuracy": float(hits.mean()), "raw_features_accuracy": float(raw_hits.mean()), "hits": hits,
            "raw_hits": raw_hits,
            "test_accuracy": completion_accuracy(known_x=emb[kn], known_y=y[known], eval_x=emb_t,
                                                 eval_y=labels.y_test[test], num_classes=k, seed=seed),
            "known_labels": float(len(known)), "scored": float(len(rest))}


def _result(run: RunArtifacts, name: str, parties: list[int], threat: str,
            extra: dict[str, Any] | None = None) -> AttackResult:
    per = {f"party{i}": complete(run, i) for i in parties}
    best_name = max(per, key=lambda p: per[p]["accuracy"])
    best = per[best_name]
    y = run.parts[1].y_train
    details: dict[str, Any] = {"party": best_name, "test_accuracy": best["test_accuracy"],
                               "known_labels": int(best["known_labels"]), "scored_samples": int(best["scored"]),
                               "majority_rate": float(np.bincount(y).max() / len(y)),
                               "parties": {p: v["accuracy"] for p, v in per.items()},
                               "baseline_is": "the same completion head fitted on the party's raw features",
                               **(extra or {})}
    return AttackResult(name, f"label accuracy of a completion head on the party's bottom ({PER_CLASS} known "
                        "labels per class), on the training samples it holds no label of",
                        best["accuracy"], best["raw_features_accuracy"], threat=threat, details=details,
                        ci=intervals.paired(best["hits"], best["raw_hits"], seed=f"{name}:{run.cfg.seed}",
                                            unit="training rows without a known label"),
                        measured_on=f"{int(best['scored'])} training rows whose label {best_name} does not know "
                                    f"({int(best['known_labels'])} known); baseline: the same head on its raw features",
                        baseline_label="raw features")


def _vertical(run: RunArtifacts) -> None:
    if not run.is_vertical:
        raise Skipped(f"{run.cfg.strategy} is not a vertical strategy")


@RUN_ATTACKS.register("passive_model_completion", "passive party: its trained bottom + a few known labels -> labels")
def passive_model_completion_attack(run: RunArtifacts) -> list[AttackResult]:
    """Every honest party tries; the best one is reported (per-party accuracies in ``parties``)."""
    _vertical(run)
    honest = [i for i in range(run.cfg.num_parties) if i != run.cfg.attack.amc_party]
    if not honest:
        raise Skipped("every party is the active completion attacker")
    return [_result(run, "passive_model_completion", honest,
                    "honest-but-curious passive party; input: its own features and final bottom; aux: "
                    f"{PER_CLASS} known training labels per class")]


@RUN_ATTACKS.register("active_model_completion",
                      "malicious passive party (attack.amc_party): scaled-up own updates, then model completion")
def active_model_completion_attack(run: RunArtifacts) -> list[AttackResult]:
    """The armed party's completion accuracy; ``passive_same_run`` = the honest parties' best, for comparison."""
    _vertical(run)
    a = run.cfg.attack
    if a.amc_party is None:
        raise Skipped("no active completion attacker in this run (set attack.amc_party)")
    honest = [i for i in range(run.cfg.num_parties) if i != a.amc_party]
    extra = {"amc_scale": a.amc_scale,
             "passive_same_run": max((complete(run, i)["accuracy"] for i in honest), default=None)}
    return [_result(run, "active_model_completion", [a.amc_party],
                    f"malicious passive party{a.amc_party}: Fu et al.'s malicious local optimizer (its own "
                    f"updates x{a.amc_scale:g}); input: its features and final bottom; aux: {PER_CLASS} known "
                    "training labels per class", extra)]
