"""Run-level attacks at prediction time on the trained model: GRN feature inference by the server
(Luo et al., ICDE 2021) and the non-targeted backdoors of a passive party (VFLAIR's noisy samples and
missing features)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from simulations.report import intervals
from simulations.report.results import RUN_ATTACKS, AttackResult
from simulations.report.run import RunArtifacts, Skipped, evaluation_noise, report_noise
from strategies.base.vertical import VerticalStrategy
from vfl.attacks.grn import grn_attack
from vfl.attacks.reconstruction import mean_baseline, mse
from vfl.attacks.robustness import accuracy_drop, missing_features, noisy_samples
from vfl.core.rng import NoiseSource, seeded_numpy, seeded_torch

GRN_EPOCHS = 300
GRN_SAMPLES = 500  # observed predictions the generator is fitted on (a seeded subset of the test set)
GRN_OPTIONS: dict[str, Any] = {"log_probs": True, "prior_weight": 1.0}
NTB_FRACTION = 0.5  # share of the test samples the malicious party corrupts
NTB_NOISE = 2.0  # noisy samples: noise std in units of each feature's std


def _vertical(run: RunArtifacts) -> None:
    if not run.is_vertical:
        raise Skipped(f"{run.cfg.strategy} is not a vertical strategy")


def _frozen(module: torch.nn.Module) -> torch.nn.Module:
    out = copy.deepcopy(module).float().eval()
    out.requires_grad_(False)
    return out


@RUN_ATTACKS.register("grn_feature_inference", "server + colluding parties: generator matched to the model's predictions")
def grn_feature_inference_attack(run: RunArtifacts, control: bool = False) -> list[AttackResult]:
    """Each party in turn is the victim of the server colluding with all other parties (their features).
    ``control``: the observed predictions shuffled across samples (they then say nothing about each
    sample's victim features: what the generator gets from its prior and the attacker's features alone)."""
    _vertical(run)
    model = run.model
    shards, labels = run.parts
    n_test = len(labels.y_test)
    pick = np.sort(seeded_numpy("report-grn-pick", run.cfg.seed).choice(n_test, size=min(GRN_SAMPLES, n_test),
                                                                         replace=False))
    xs = [s.x_test[pick] for s in shards]
    with torch.no_grad():  # what the server observed: the head's output on the mechanism's release
        observed = torch.softmax(model.logits(xs, noise=report_noise(run, "grn")), dim=1).numpy()
    if control:
        observed = observed[seeded_numpy("report-grn-control", run.cfg.seed).permutation(len(observed))]
    head = _frozen(model.head)
    bottoms = [_frozen(b) for b in model.bottoms]
    strategy = model.strategy
    embs = model.embeddings(xs)
    gen = seeded_torch("report-grn", run.cfg.seed)
    mses, bases = [], []
    per_sample, per_sample_base = np.zeros(len(pick)), np.zeros(len(pick))  # each sample's MSE, mean over victims
    for v, shard in enumerate(shards):
        others = [e for i, e in enumerate(embs) if i != v]
        adv = np.concatenate([x.reshape(len(x), -1) for i, x in enumerate(xs) if i != v] or [np.zeros((len(xs[v]), 0))],
                             axis=1)
        shape = shard.input_shape

        def predict(_adv: torch.Tensor, est: torch.Tensor, v: int = v, others: list[torch.Tensor] = others,
                    shape: tuple[int, ...] = shape) -> torch.Tensor:
            parts = list(others)
            parts.insert(v, bottoms[v](est.reshape(len(est), *shape)))
            fused = VerticalStrategy.release(strategy, parts, noise=NoiseSource.fresh())  # the plain fusion
            return torch.softmax(head(fused.float()), dim=1)

        truth = xs[v].reshape(len(xs[v]), -1)
        train = shard.x_train.reshape(len(shard.x_train), -1)
        est = grn_attack(predict=predict, adv_x=adv, observed=observed, prior_mean=train.mean(0),
                         prior_std=train.std(0), rng=gen, seed=run.cfg.seed + v, epochs=GRN_EPOCHS, **GRN_OPTIONS)
        mses.append(mse(est, truth))
        bases.append(mean_baseline(shard.x_train.reshape(len(shard.x_train), -1), truth))
        per_sample += ((np.asarray(est, np.float64).reshape(len(truth), -1) - truth) ** 2).mean(1) / len(shards)
        per_sample_base += ((train.mean(0) - truth) ** 2).mean(1) / len(shards)
    details = {"per_party_mse": [float(m) for m in mses], "per_party_baseline_mse": [float(b) for b in bases],
               "mse_over_baseline": float(np.mean(mses) / np.mean(bases)), "samples": int(len(observed)),
               "epochs": GRN_EPOCHS, **GRN_OPTIONS, "control_shuffled_predictions": control,
               "baseline_is": "predicting the victim's training mean"}
    return [AttackResult("grn_feature_inference", "victim feature MSE of the generator (per party, mean)",
                         float(np.mean(mses)), float(np.mean(bases)), higher_is_better_attack=False,
                         threat="server (trained head + white-box bottoms, Luo et al.'s known model) colluding with "
                                "every other party (their features); input: the prediction vectors of the test set; "
                                "aux: each victim feature's training mean and std",
                         details=details,
                         ci=intervals.paired(per_sample, per_sample_base, seed=f"grn:{run.cfg.seed}:{control}",
                                             unit="test rows"),
                         measured_on=f"{len(observed)} test rows' predictions (the report's seeded draw of the "
                                     f"mechanism); each of the {len(shards)} parties the victim in turn",
                         baseline_label="mean guess")]


Perturb = Callable[..., tuple[np.ndarray, np.ndarray]]


def _accuracy_drop(run: RunArtifacts, name: str, metric: str, perturb: Perturb) -> list[AttackResult]:
    """The most damaging single passive party (per-party drops in ``parties``)."""
    _vertical(run)
    model = run.model
    shards, labels = run.parts
    xs, y = [s.x_test for s in shards], labels.y_test
    clean = model.logits(xs, noise=evaluation_noise(run)).argmax(1).numpy()  # the report's evaluation, draw 0
    per, drops = {}, {}
    for i in range(len(shards)):
        x_att, rows = perturb(xs[i], fraction=NTB_FRACTION, rng=seeded_numpy(f"report-{name}", run.cfg.seed, i))
        attacked = model.logits([x_att if j == i else x for j, x in enumerate(xs)],
                                noise=evaluation_noise(run)).argmax(1).numpy()  # the same draw: a paired comparison
        per[f"party{i}"] = accuracy_drop(clean_pred=clean, attacked_pred=attacked, y=y, rows=rows)
        drops[f"party{i}"] = (clean == y).astype(float) - (attacked == y).astype(float)
    worst = max(per, key=lambda p: per[p]["acc_drop"])
    details = {"party": worst, **per[worst], "fraction": NTB_FRACTION,
               "parties": {p: v["acc_drop"] for p, v in per.items()},
               "baseline_is": "no drop (0): clean_acc is the report's evaluation of the test set (its seeded draw 0 "
                              "of the mechanism, the same draw for the attacked features)"}
    return [AttackResult(name, metric, per[worst]["acc_drop"], 0.0,
                         threat="malicious passive party at prediction time: corrupts only its own test features",
                         details=details,
                         ci=intervals.paired(drops[worst], np.zeros(len(y)), seed=f"{name}:{run.cfg.seed}",
                                             unit="test rows"),
                         measured_on=f"all {len(y)} test rows, {NTB_FRACTION:.0%} of them corrupted by {worst} (the "
                                     "most damaging party); clean and attacked through the same seeded draw of the "
                                     "mechanism", baseline_label="no attack")]


@RUN_ATTACKS.register("noisy_samples", "malicious passive party adds noise to its features of half the test samples")
def noisy_samples_attack(run: RunArtifacts) -> list[AttackResult]:
    return _accuracy_drop(run, "noisy_samples", f"acc_drop: clean − attacked test accuracy (N(0, ({NTB_NOISE:g}·std)²) "
                          f"on {NTB_FRACTION:.0%} of the samples)",
                          lambda x, **kw: noisy_samples(x, scale=NTB_NOISE, **kw))


@RUN_ATTACKS.register("missing_features", "malicious passive party withholds its features of half the test samples")
def missing_features_attack(run: RunArtifacts) -> list[AttackResult]:
    return _accuracy_drop(run, "missing_features", f"acc_drop: clean − attacked test accuracy (features zeroed on "
                          f"{NTB_FRACTION:.0%} of the samples)", missing_features)
