"""Run-level one-run audit (Steinke, Nasr & Jagielski, NeurIPS 2023): the server guesses the canary bits.

The canary party replaced each canary sample's embedding by ±C·1 (``attack.canaries``). The server
scores every canary from its view: the canary party's own message when it can read it (NPQ, LDP,
PBM without SecAgg), else the fused input it derived (the decoded secure sum). Score > 0 means
"+C". With ``privacy.noise_rng: seeded`` the server also regenerates the noise from the public
seeded recipe (``vfl.attacks.seeded_noise``) — which is why a seeded run's ε is no guarantee.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from parties.vertical.wire import party_node_id
from simulations.report.intervals import Interval
from simulations.report.observe import Observed, server_embeddings, server_fused
from simulations.report.results import RUN_ATTACKS, AttackResult
from simulations.report.run import RunArtifacts, Skipped
from vfl.attacks.audit import canary_design, max_auditable_epsilon, one_run_audit
from vfl.attacks.seeded_noise import (
    regenerate_binomial,
    regenerate_discrete_gaussian,
    regenerate_normal,
    round_source,
)

PURPOSE = {"gaussian": "ldp", "binomial": "pbm"}  # NoiseSource purposes of the LDP and PBM mods


def _source(run: RunArtifacts, purpose: str, index: int, o: Observed) -> Any:
    return round_source(seed=run.cfg.seed, purpose=purpose, node=party_node_id(index), phase="train",
                        epoch=o.epoch, step=o.step)


def _pbm(run: RunArtifacts) -> tuple[int, float] | None:
    p = run.cfg.params
    return (int(p.b), float(p.beta)) if hasattr(p, "b") and hasattr(p, "beta") and not hasattr(p, "sigma") else None


def _own_message_score(run: RunArtifacts, o: Observed, rows: list[int], seeded: bool) -> np.ndarray:
    """Scores of canary rows from the canary party's own (readable) message."""
    idx = run.cfg.attack.canary_party
    vals = o.rows[rows].astype(np.float64)
    if o.entry["name"] == "e":  # float embedding (NPQ; LDP: + Gaussian noise)
        sigma = getattr(run.strategy, "sigma", None)
        if seeded and sigma is not None and getattr(run.cfg.params, "noise", "float") == "discrete":
            vals = vals - regenerate_discrete_gaussian(_source(run, PURPOSE["gaussian"], idx, o), sigma=sigma,
                                                       c=run.cfg.model.tanh_c, shape=tuple(o.rows.shape))[rows]
        elif seeded and sigma is not None:
            z = regenerate_normal(_source(run, PURPOSE["gaussian"], idx, o), tuple(o.rows.shape))
            vals = vals - sigma * z.astype(np.float32)[rows]
        return vals.sum(axis=1)  # type: ignore[no-any-return]
    pbm = _pbm(run)
    if pbm is None:
        raise Skipped(f"integer embeddings of strategy {run.cfg.strategy!r}: no audit scorer")
    b, beta = pbm
    if not seeded:
        return (vals - b / 2).sum(axis=1)  # type: ignore[no-any-return]
    plus, minus = (regenerate_binomial(_source(run, PURPOSE["binomial"], idx, o), trials=b, p=0.5 + s * beta,
                                       shape=o.rows.shape)[rows] for s in (1, -1))
    return (np.abs(vals - minus) - np.abs(vals - plus)).sum(axis=1)  # type: ignore[no-any-return]


def _fused_score(run: RunArtifacts, o: Observed, rows: list[int], seeded: bool) -> np.ndarray:
    """Scores of canary rows from the fused input (SecAgg: the decoded sum of every party's counts)."""
    vals = o.rows[rows]
    pbm = _pbm(run)
    if not seeded or pbm is None:
        return vals.sum(axis=1)  # type: ignore[no-any-return]
    b, beta = pbm
    c, m = run.cfg.model.tanh_c, run.cfg.num_parties
    q = np.rint(vals * beta * b / c + b * m / 2)  # the integer sum the decode started from
    residual = q.copy()
    canary = run.cfg.attack.canary_party
    plus = minus = q
    for index in range(m):
        hi, lo = (regenerate_binomial(_source(run, PURPOSE["binomial"], index, o), trials=b, p=0.5 + s * beta,
                                      shape=o.rows.shape)[rows] for s in (1, -1))
        if index == canary:
            plus, minus = hi, lo
        else:
            residual -= (hi + lo) / 2  # the others' counts: known up to where their input put them
    return (np.abs(residual - minus) - np.abs(residual - plus)).sum(axis=1)  # type: ignore[no-any-return]


def canary_scores(run: RunArtifacts, ids: np.ndarray) -> tuple[np.ndarray, str]:
    """One score per canary (sum over every recorded appearance) and what the server scored from."""
    seeded = run.cfg.privacy.noise_rng == "seeded"
    pos = {int(i): k for k, i in enumerate(ids)}
    scores = np.zeros(len(ids))
    own = server_embeddings(run).get(run.cfg.attack.canary_party)
    obs, scorer, what = ((own, _own_message_score, "the canary party's own messages") if own
                         else (server_fused(run), _fused_score, "the fused input (decoded sum)"))
    if not obs:
        raise Skipped("the server's view holds no training round")
    for o in obs:
        rows = [r for r, sid in enumerate(o.ids) if int(sid) in pos]
        if rows:
            scores[[pos[int(o.ids[r])] for r in rows]] += scorer(run, o, rows, seeded)
    return scores, what + (" with the noise regenerated from the seed" if seeded else "")


@RUN_ATTACKS.register("audit", "one-run privacy audit: empirical epsilon lower bound from the server's view")
def audit_attack(run: RunArtifacts) -> list[AttackResult]:
    a = run.cfg.attack
    if not a.canaries:
        raise Skipped("no audit canaries (set attack.canaries=M with privacy.record_views=true)")
    ids, bits = canary_design(num_train=len(run.parts[1].y_train), m=a.canaries, seed=run.cfg.seed)
    scores, what = canary_scores(run, ids)
    delta = run.cfg.privacy.delta
    res = one_run_audit(scores, bits, delta=delta)
    eps = run.summary.get("epsilon")
    seeded = run.cfg.privacy.noise_rng == "seeded"
    details: dict[str, Any] = {**{k: v for k, v in res.items() if k != "epsilon_lower"},
                               "accountant_epsilon": eps, "delta": delta, "scored_from": what,
                               "ceiling": max_auditable_epsilon(m=a.canaries, delta=delta),
                               "epsilon_is_guarantee": not seeded and run.summary.get("epsilon_is_guarantee") is not False}
    if seeded:
        details["why"] = ("privacy.noise_rng=seeded: the noise is a public function of the run seed, so the server "
                          "regenerates it and removes it; the accountant's epsilon assumes noise nobody else can "
                          "predict, so the audit may exceed it (the reported epsilon is not a guarantee)")
    return [AttackResult("audit", "empirical epsilon lower bound (95 %, one run)", res["epsilon_lower"], 0.0,
                         threat="server (canaries at party "
                                f"{a.canary_party}: embedding = ±C by a hidden bit; {a.canaries} canaries)",
                         details=details,
                         ci=Interval(res["epsilon_lower"], details["ceiling"], "Steinke et al.'s one-run bound: the "
                                     "value is itself a 95 % lower bound (up to the ceiling m canaries can show)"),
                         measured_on=f"{a.canaries} canaries' hidden bits guessed from the server's view ({what})",
                         baseline_label="random guesses")]
