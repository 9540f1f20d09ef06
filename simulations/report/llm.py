"""The split-LLM strategies measure their own leakage during training; the report lists it as attacks."""

from __future__ import annotations

from simulations.report.results import RUN_ATTACKS, AttackResult
from simulations.report.run import RunArtifacts, Skipped


@RUN_ATTACKS.register("llm_leak", "label leakage / embedding inversion (nearest-neighbour, relaxation, learned) and attribute inference measured by split-LLM runs")
def llm_leak_attack(run: RunArtifacts) -> list[AttackResult]:
    s = run.summary
    out = []
    if s.get("leak") is not None:  # P3EFT and its baselines: worst epoch over every model server's log
        out.append(AttackResult("label_leak_server", "leak (max of spectral/norm AUC, k-means acc, sign-invariant "
                                "k-means; worst epoch)", float(s["leak"]), 0.5, threat="model server: activations it "
                                "returned, gradient pieces it received (P3EFT §4.2 metrics), g_h it recovers from "
                                "successive adapter states (θ-difference, §3.3) and all adapters' activations",
                                details={k: s[k] for k in ("leak_spectral", "leak_norm", "leak_kmeans", "leak_sign",
                                                           "leak_act", "leak_grad", "leak_theta", "leak_cat",
                                                           "leak_probe") if s.get(k) is not None}))
    defense = {k: s[k] for k in ("eta", "eia_target", "eta_calibrated_eia", "santext_epsilon", "santext_epsilon_scope",
                                 "santext_epsilon_is_guarantee", "santext_changed") if s.get(k) is not None}
    if s.get("eia_rate") is not None:  # SAP: embedding inversion by the vendor
        out.append(AttackResult("embedding_inversion", "token recovery rate (EIA: nearest neighbour at split 0, "
                                "relaxed optimization deeper)", float(s["eia_rate"]), 0.0,
                                threat="vendor: the privatized representations it received", details=defense))
    if s.get("inverter_rate") is not None:  # SAP: the learned inverter on the same observations
        out.append(AttackResult("learned_inversion", "token recovery rate (learned inverter)", float(s["inverter_rate"]),
                                0.0, threat="vendor: the representations it received, and an inverter it trained on "
                                "public token sequences through its public bottom and the public release mechanism",
                                details=defense))
    if s.get("aia_acc") is not None:
        out.append(AttackResult("attribute_inference", "attribute accuracy (AIA)", float(s["aia_acc"]),
                                float(s.get("aia_majority") or 0.0), threat="vendor: the best by cross-validation of "
                                "pooled/length probes and a transformer fine-tuned on the representations, "
                                "a share of the attribute values known",
                                details={k: s[k] for k in ("aia_probe_name", "ep_aia_ci_low", "ep_aia_ci_high",
                                                           "aia_mlp_acc", "aia_linear_acc", "aia_length_acc",
                                                           "aia_linear_length_acc", "aia_transformer_acc")
                                         if s.get(k) is not None}))
    if not out:
        raise Skipped("no split-LLM leak metrics in the summary")
    return out
