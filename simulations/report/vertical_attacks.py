"""Run-level attacks on what vertical-FL nodes received: label inference, feature reconstruction, DLG.

Each function reads one node's recorded view (``simulations.report.observe``), runs a pure attack
of ``vfl.attacks`` and scores it with the ground truth. Auxiliary knowledge is declared per attack.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from simulations.report import intervals
from simulations.report.observe import (
    latest_by_sample,
    received_gradients,
    server_embeddings,
    server_fused,
)
from simulations.report.results import RUN_ATTACKS, AttackResult
from simulations.report.run import RunArtifacts, Skipped
from vfl.attacks.gradient_inversion import dlg, idlg_label, input_gradients
from vfl.attacks.label_inference import label_inference
from vfl.attacks.reconstruction import mean_baseline, mse, psnr, reconstruct
from vfl.core.rng import seeded_numpy, seeded_torch

MAX_WINDOWS = 30
AUX_FRACTION = 0.2


def _vertical(run: RunArtifacts) -> None:
    if not run.is_vertical:
        raise Skipped(f"{run.cfg.strategy} is not a vertical strategy (its own leak metrics are in the summary)")


@RUN_ATTACKS.register("label_inference", "passive party infers labels from the gradients it received")
def label_inference_attack(run: RunArtifacts) -> list[AttackResult]:
    """Party views -> windowed norm/direction/spectral/k-means label leakage (Li et al. 2022; Sun et al. 2022)."""
    _vertical(run)
    y = run.parts[1].y_train
    same = run.cfg.model.fusion == "sum"  # one broadcast tensor: every party got the same rows
    parties = [0] if same else list(range(run.cfg.num_parties))
    per_party: dict[str, float] = {}
    best: dict[str, Any] | None = None
    best_party, rows_seen = 0, 0
    for index in parties:
        obs = received_gradients(run, index)
        batches = [(o.rows, y[o.ids]) for o in obs]
        window = max(256, 2 * run.cfg.train.batch_size)
        n_win = max(1, sum(len(b[1]) for b in batches) // window)
        if n_win > MAX_WINDOWS:  # evenly spaced stretches of training, MAX_WINDOWS of them
            keep = np.linspace(0, len(batches) - 1, MAX_WINDOWS * max(1, window // run.cfg.train.batch_size))
            batches = [batches[i] for i in np.unique(keep.astype(int))]
        res = label_inference(batches, window=window, rng=seeded_numpy("report-label", run.cfg.seed, index))
        per_party[f"party{index}"] = res["leak"]
        if best is None or res["leak"] > best["leak"]:
            best, best_party, rows_seen = res, index, sum(len(b[1]) for b in batches)
    if best is None:
        raise Skipped("no party view to score")
    details: dict[str, Any] = {k: best[k] for k in ("spectral", "norm", "kmeans", "cosine", "leak_max", "windows")}
    details["parties"] = per_party
    details["classes"] = int(run.parts[1].num_classes)
    pairs = [(a, c) for a, c in zip(best["window_leak"], best["window_chance"], strict=True)
             if np.isfinite(a) and np.isfinite(c)]
    ci = (intervals.paired([a for a, _ in pairs], [c for _, c in pairs], seed=f"label_inference:{run.cfg.seed}",
                           unit="windows") if len(pairs) > 1 else None)
    return [AttackResult("label_inference", "leak (max of spectral/norm AUC, k-means/cosine accuracy; mean over "
                         "windows)", best["leak"], best["chance"],
                         threat="honest-but-curious passive party; input: the gradient rows it received + the "
                                "shared batch schedule; no labels", details=details, ci=ci,
                         measured_on=f"training gradient rows party{best_party} received: {rows_seen} rows in "
                                     f"{int(best['windows'])} windows of >= {window} rows; chance: the same windows, "
                                     "labels shuffled", baseline_label="shuffled labels")]


def _observations(run: RunArtifacts) -> tuple[str, dict[int, tuple[np.ndarray, np.ndarray]] | None,
                                               tuple[np.ndarray, np.ndarray] | None]:
    """What the server can read per sample: each party's embedding, or only the fused sum."""
    per_party = server_embeddings(run)
    if len(per_party) == run.cfg.num_parties:
        return "per-party embeddings", {i: latest_by_sample(o) for i, o in per_party.items()}, None
    fused = server_fused(run)
    if not fused:
        raise Skipped("the server's view holds neither readable embeddings nor its fused input")
    return "fused sum only", None, latest_by_sample(fused)


@RUN_ATTACKS.register("feature_reconstruction", "server reconstructs each party's features with a decoder")
def feature_reconstruction_attack(run: RunArtifacts) -> list[AttackResult]:
    """Decoder trained on a held-out slice (aux) maps what the server saw -> each party's features."""
    _vertical(run)
    what, per_party, fused = _observations(run)
    if per_party is not None:
        common = sorted(set.intersection(*(set(ids.tolist()) for ids, _ in per_party.values())))
        ids = np.asarray(common, dtype=np.int64)
        obs = np.concatenate([rows[np.searchsorted(pids, ids)] for pids, rows in
                              (per_party[i] for i in range(run.cfg.num_parties))], axis=1)
    elif fused is not None:
        ids, obs = fused
    else:
        raise Skipped("nothing the server received could be read")
    if len(ids) < 20:
        raise Skipped(f"only {len(ids)} training samples observed; record more rounds")
    rng = seeded_numpy("report-recon", run.cfg.seed)
    perm = rng.permutation(len(ids))
    n_aux = max(10, int(AUX_FRACTION * len(ids)))
    aux, test = np.sort(perm[:n_aux]), np.sort(perm[n_aux:])
    shards = run.parts[0]
    mses, bases, psnrs, recon = [], [], [], []
    per_sample, per_sample_base = np.zeros(len(test)), np.zeros(len(test))  # each sample's MSE, mean over parties
    for m, shard in enumerate(shards):
        x = shard.x_train[ids].reshape(len(ids), -1).astype(np.float64)
        pred = reconstruct(aux_obs=obs[aux], aux_x=x[aux], obs=obs[test], seed=run.cfg.seed + m)
        err = mse(pred, x[test])
        rng_ = float(x[test].max() - x[test].min()) or 1.0
        mses.append(err)
        bases.append(mean_baseline(x[aux], x[test]))
        psnrs.append(psnr(err, data_range=rng_))
        recon.append(pred)
        per_sample += ((np.asarray(pred, np.float64).reshape(len(test), -1) - x[test]) ** 2).mean(1) / len(shards)
        per_sample_base += ((x[aux].mean(0) - x[test]) ** 2).mean(1) / len(shards)
    details = {"observed": what, "aux_samples": int(n_aux), "scored_samples": int(len(test)),
               "per_party_mse": [float(v) for v in mses], "per_party_baseline_mse": [float(v) for v in bases],
               "psnr_db": float(np.mean(psnrs)), "mse_over_baseline": float(np.mean(mses) / np.mean(bases))}
    from simulations.report.figures import reconstruction_figure

    figure = reconstruction_figure(run, ids[test], recon)
    return [AttackResult("feature_reconstruction", "feature MSE (per party, mean); baseline: aux-mean guess",
                         float(np.mean(mses)), float(np.mean(bases)), higher_is_better_attack=False,
                         threat="honest-but-curious server; input: what it received for each training sample "
                                f"({what}); aux: raw features of {AUX_FRACTION:.0%} of the samples",
                         details=details, figure=figure,
                         ci=intervals.paired(per_sample, per_sample_base, seed=f"feature_reconstruction:{run.cfg.seed}",
                                             unit="scored training samples"),
                         measured_on=f"{len(test)} training samples the server observed ({what}), scored on every "
                                     f"party's features; {n_aux} more were the attacker's aux",
                         baseline_label="mean guess")]


@RUN_ATTACKS.register("gradient_inversion", "DLG/iDLG on single-sample gradient rows a party received")
def gradient_inversion_attack(run: RunArtifacts, samples: int = 8) -> list[AttackResult]:
    """DLG (input + label) and iDLG (label) from gradient rows, with the head as white-box knowledge."""
    _vertical(run)
    if run.cfg.model.fusion != "sum":
        raise Skipped("with concat fusion a party receives only its slice of the head's input gradient")
    obs = received_gradients(run, 0)
    last = max(reversed(obs), key=lambda o: len(o.ids))  # the latest full batch (the last one may be short)
    head = copy.deepcopy(run.model.head).double()
    y = run.parts[1].y_train
    fused = {(o.epoch, o.step): o for o in server_fused(run)} if run.has_views else {}
    truth = fused.get((last.epoch, last.step))
    k = int(run.parts[1].num_classes)
    gen = seeded_torch("report-dlg", run.cfg.seed)
    rows = np.linspace(0, len(last.ids) - 1, min(samples, len(last.ids))).astype(int)
    hits_dlg = hits_idlg = 0
    errs = []
    scale = 1.0 / len(last.ids)  # the server's loss is the batch mean
    for r in rows:
        g = torch.as_tensor(last.rows[r], dtype=torch.float64)[None]
        x_hat, y_hat, _ = dlg(gradient_of=input_gradients(head, scale=scale), observed=[g],
                              input_shape=(g.shape[1],), num_classes=k, generator=gen, iters=100, restarts=2)
        hits_dlg += int(y_hat == y[last.ids[r]])
        x = x_hat[None].clone().requires_grad_(True)
        jac = torch.autograd.functional.jacobian(lambda h: head(h)[0], x)[:, 0, :]  # (K, P)
        delta = torch.linalg.lstsq(jac.T, g[0] / scale).solution  # logit gradient: softmax - onehot(y)
        hits_idlg += int(idlg_label(delta) == y[last.ids[r]])
        if truth is not None:
            errs.append(float(((x_hat.numpy() - truth.rows[r]) ** 2).mean()))
    majority = float(np.bincount(y).max() / len(y))
    details = {"samples": int(len(rows)), "round": last.entry["round"],
               "head": "final checkpoint (white-box aux; the gradient was computed at most one epoch earlier)"}
    on = (f"{len(rows)} single-sample gradient rows party0 received in round {last.entry['round']} (its last full "
          "batch); chance: the training labels' majority rate")
    out = [AttackResult("dlg_label", "label accuracy of DLG (L-BFGS on dummy input+label)",
                        hits_dlg / len(rows), majority, threat="passive party + white-box head", details=details,
                        ci=intervals.wilson(hits_dlg, len(rows)), measured_on=on, baseline_label="majority class")]
    out.append(AttackResult("idlg_label", "label accuracy of iDLG (sign of the logit gradient)",
                            hits_idlg / len(rows), majority, threat="passive party + white-box head", details=details,
                            ci=intervals.wilson(hits_idlg, len(rows)), measured_on=on, baseline_label="majority class"))
    if errs:
        var = float(truth.rows.var()) if truth is not None else float("nan")
        out.append(AttackResult("dlg_input", "MSE of the recovered head input vs what the head saw",
                                float(np.mean(errs)), var, higher_is_better_attack=False,
                                threat="passive party + white-box head", details=details,
                                ci=intervals.mean(errs, seed=f"dlg_input:{run.cfg.seed}", unit="gradient rows")
                                if len(errs) > 1 else None,
                                measured_on=f"{len(errs)} head inputs of round {last.entry['round']}; baseline: their "
                                            "variance (the MSE of guessing their mean)", baseline_label="variance"))
    return out
