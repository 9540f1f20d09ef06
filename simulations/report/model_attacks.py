"""Run-level attacks on the trained model (last checkpoint): membership, ReLU extraction, backdoor."""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from simulations.report import intervals
from simulations.report.results import RUN_ATTACKS, AttackResult
from simulations.report.run import RunArtifacts, Skipped, report_noise
from vfl.attacks.backdoor import attack_success_rate, stamp_trigger
from vfl.attacks.extraction import extract, match_neurons, untanh
from vfl.attacks.membership import control_split, label_only_scores, loss_scores, roc_metrics
from vfl.core.rng import seeded_numpy, seeded_torch

MAX_MEMBERS = 500


def extraction_budget(*, lines: int, width: int, dim: int) -> int:
    """Query rows the extraction may ask: per line ~2 bends per first-layer neuron, each costing two
    Jacobians (2(d+1) rows) and four probe lines (~1,000 rows + a Jacobian each), with a 4x margin.
    A digits bottom (d 16, width 32, 10 lines) gets 1.5M and asks ~100k."""
    return lines * 4 * width * (1000 + 10 * (dim + 1))


def _flat(xs: list[np.ndarray]) -> torch.Tensor:
    return torch.as_tensor(np.concatenate([x.reshape(len(x), -1) for x in xs], axis=1), dtype=torch.float32)


@RUN_ATTACKS.register("membership", "loss-threshold and label-only membership inference on the trained model")
def membership_attack(run: RunArtifacts) -> list[AttackResult]:
    """Members = training samples, non-members = test samples; chance = AUC 0.5, with the bootstrap
    interval of the AUC; control = two halves of the test set (never seen: its AUC shows the spread at
    chance, ``control_auc``)."""
    if not run.is_vertical:
        raise Skipped(f"{run.cfg.strategy} is not a vertical strategy")
    model = run.model
    shards, labels = run.parts
    rng = seeded_numpy("report-mia", run.cfg.seed)
    n = min(MAX_MEMBERS, len(labels.y_train), len(labels.y_test) // 2 * 2)
    mem = np.sort(rng.choice(len(labels.y_train), size=n, replace=False))
    non = np.sort(rng.choice(len(labels.y_test), size=min(n, len(labels.y_test)), replace=False))
    x_mem, y_mem = _flat([s.x_train[mem] for s in shards]), torch.as_tensor(labels.y_train[mem])
    x_non, y_non = _flat([s.x_test[non] for s in shards]), torch.as_tensor(labels.y_test[non])
    std = float(torch.cat([x_mem, x_non]).std(0).median()) or 1.0
    gen = seeded_torch("report-mia", run.cfg.seed)
    predict = model.predict_flat
    out = []
    ctrl_a, ctrl_b = control_split(len(non), rng=rng)
    for name, metric, score in (
        ("membership_loss", "ROC AUC, loss threshold (Yeom et al. 2018)", lambda x, y: loss_scores(predict, x, y)),
        ("membership_label_only", "ROC AUC, label-only noise robustness (Choquette-Choo et al. 2021)",
         lambda x, y: label_only_scores(predict, x, y, noise_std=0.5 * std, queries=16, generator=gen)),
    ):
        s_mem, s_non = score(x_mem, y_mem), score(x_non, y_non)
        real = roc_metrics(s_mem, s_non)
        control = roc_metrics(s_non[ctrl_a], s_non[ctrl_b])  # "members" the model never saw either
        out.append(AttackResult(name, metric, real["auc"], 0.5,
                                threat="black-box queries to the trained fusion model (all bottoms + head)",
                                details={"tpr_at_1pct_fpr": real["tpr_at_1pct_fpr"], "control_auc": control["auc"],
                                         "control_tpr_at_1pct_fpr": control["tpr_at_1pct_fpr"],
                                         "members": int(n), "non_members": int(len(non)),
                                         "baseline_is": "0.5, the AUC of a score that carries nothing; control_auc: the "
                                                        "same attack on two halves of the test set, which the model "
                                                        "never saw (the spread at chance)"},
                                ci=intervals.auc(s_mem, s_non, seed=f"{name}:{run.cfg.seed}"),
                                measured_on=f"{n} training rows (members) against {len(non)} test rows (non-members); "
                                            f"never-seen control {len(ctrl_a)} against {len(ctrl_b)} test rows",
                                baseline_label="chance"))
    return out


def _first_linear(bottom: nn.Module) -> nn.Linear | None:
    for mod in bottom.modules():
        if isinstance(mod, nn.Linear):
            return mod
        if isinstance(mod, nn.Conv2d):
            return None
    return None


@RUN_ATTACKS.register("extraction", "Rolnick & Kording first-layer extraction of party 0's ReLU bottom")
def extraction_attack(run: RunArtifacts, party: int = 0, lines: int = 10) -> list[AttackResult]:
    """Query party ``party``'s bottom (float64, tanh undone) and recover its first-layer hyperplanes."""
    if not run.is_vertical:
        raise Skipped(f"{run.cfg.strategy} is not a vertical strategy")
    bottom = run.model.bottoms[party]
    first = _first_linear(bottom)
    if first is None or not any(isinstance(m, nn.ReLU) for m in bottom.modules()):
        raise Skipped("extraction is implemented for MLP bottoms with ReLU hidden layers")
    net = copy.deepcopy(bottom).double()
    c = run.cfg.model.tanh_c

    def oracle(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return untanh(net(torch.from_numpy(x)).numpy(), c=c)

    x = run.parts[0][party].x_train.reshape(len(run.parts[0][party].x_train), -1).astype(np.float64)
    center = x.mean(0)
    radius = float(2 * np.linalg.norm(x - center, axis=1).mean())
    budget = extraction_budget(lines=lines, width=first.out_features, dim=x.shape[1])
    got = extract(oracle, dim=x.shape[1], radius=radius, lines=lines, rng=seeded_numpy("report-extract", run.cfg.seed),
                  center=center, max_queries=budget)
    normals, offsets = got.normals, got.offsets
    w = first.weight.detach().double().numpy()
    b = first.bias.detach().double().numpy()
    res = match_neurons(w, b, normals, offsets)
    rng = seeded_numpy("report-extract-chance", run.cfg.seed)
    rand = rng.normal(size=(max(1, len(normals)), w.shape[1]))
    chance = match_neurons(w, b, rand / np.linalg.norm(rand, axis=1, keepdims=True), np.zeros(len(rand)))
    res.update(queries=float(got.queries), radius=radius, query_budget=float(budget),
               lines=float(lines), lines_done=float(got.lines_done), noisy_lines=float(got.noisy_lines))
    neurons = int(w.shape[0])
    return [AttackResult("extraction", f"share of party{party}'s first-layer neurons recovered (cosine > 0.99 up to sign)",
                         res["recovered"], chance["recovered"],
                         threat="query access to the party's bottom (chosen inputs -> embedding), known architecture",
                         details=res, ci=intervals.wilson(int(round(res["recovered"] * neurons)), neurons),
                         measured_on=f"party{party}'s {neurons} first-layer neurons, {int(got.queries)} queries; "
                                     "chance: as many random directions", baseline_label="random directions")]


@RUN_ATTACKS.register("backdoor", "attack success rate of the gradient-replacement backdoor (attack.backdoor_party)")
def backdoor_attack(run: RunArtifacts) -> list[AttackResult]:
    """ASR on triggered non-target test samples through the mechanism's release; baseline: untriggered."""
    a = run.cfg.attack
    if a.backdoor_party is None:
        raise Skipped("no malicious party in this run (set attack.backdoor_party)")
    model = run.model
    shards, labels = run.parts
    xs = [s.x_test for s in shards]
    trig = list(xs)
    trig[a.backdoor_party] = stamp_trigger(xs[a.backdoor_party], size=a.backdoor_trigger_size,
                                           value=a.backdoor_trigger)
    y = labels.y_test
    noise = report_noise(run, "backdoor")
    pred_clean = model.logits(xs, noise=noise).argmax(1).numpy()
    pred_trig = model.logits(trig, noise=noise).argmax(1).numpy()
    plain_trig = model.logits(trig).argmax(1).numpy()
    asr = attack_success_rate(pred_trig, y, target=a.backdoor_target)
    base = attack_success_rate(pred_clean, y, target=a.backdoor_target)
    clean_acc = float((pred_clean == y).mean())
    rows = np.asarray(y) != a.backdoor_target  # the non-target samples the success rate is over
    hit_trig = (pred_trig[rows] == a.backdoor_target).astype(float)
    hit_clean = (pred_clean[rows] == a.backdoor_target).astype(float)
    return [AttackResult("backdoor", f"attack success rate (triggered -> class {a.backdoor_target})", asr, base,
                         threat=f"malicious passive party{a.backdoor_party}: trigger in its own features + gradient "
                                f"replacement (gamma={a.backdoor_amplify}, {a.backdoor_known} known target samples)",
                         details={"clean_accuracy": clean_acc,
                                  "asr_without_mechanism_noise": attack_success_rate(plain_trig, y,
                                                                                    target=a.backdoor_target),
                                  "baseline_is": "untriggered non-target samples predicted as the target"},
                         ci=intervals.paired(hit_trig, hit_clean, seed=f"backdoor:{run.cfg.seed}",
                                             unit="non-target test rows"),
                         measured_on=f"{int(rows.sum())} non-target test rows, triggered and not, through the "
                                     "mechanism's release (the report's seeded draw)", baseline_label="no trigger")]
