"""The split-LLM strategies measure their own leakage during training; the report lists it as attacks."""

from __future__ import annotations

from typing import Any

from simulations.report.intervals import wilson
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
    for r in out:  # no sample counts in the summary: these verdicts use the rough rule (no interval)
        r.measured_on = "the strategy's own measurement during training (summary.json); no sample count, no interval"
    return out


USHAPE = ("ushape-lora", "ushape-p3eft")
MAX_JACOBIAN = 50_000_000  # V × d × tokens of the label attack's Jacobians a report computes at most


@RUN_ATTACKS.register("ushape_leak", "U-shaped split: the response tokens a model server reads from the body gradient "
                      "(or its piece) and from the body adapters' first update; the prompt tokens from the head's release")
def ushape_leak_attack(run: RunArtifacts) -> list[AttackResult]:
    """The model server's attacks of ``parties/llm/ushape/attacks.py`` on what it received at step 0:0
    (recorded views), scored against the client's rows of that step (the experimenter's truth)."""
    import numpy as np
    import torch

    from parties.llm.common.wire import pack
    from parties.llm.ushape.attacks import labels_from_gradient, labels_from_update, tokens_nearest
    from parties.llm.ushape.build import build_parts
    from parties.llm.ushape.instruct import IGNORE
    from parties.llm.ushape.private import body_adapters
    from parties.llm.ushape.wire import CLIENT_ID, Kind
    from vfl.engine.strategy import STRATEGIES

    cfg = run.cfg
    if cfg.strategy not in USHAPE:
        raise Skipped(f"{cfg.strategy} is not a U-shaped split")
    strat: Any = STRATEGIES.get(cfg.strategy, "strategy")(cfg)
    strat.prepare(run.data)
    specs = {s.node_id: s for s in strat.layout()}
    servers = [s for s in specs.values() if s.is_server]
    views = {s.name: run.view(s.name) for s in servers}

    def step0(view: Any, kind: str, record: str, name: str, step: int = 0) -> Any:
        for e, a in view.select(kind=kind, record=record, name=name, phase="train"):
            if (e.get("epoch"), e.get("step")) == (0, step):
                return torch.as_tensor(np.array(a))
        raise Skipped(f"no {kind} {record}/{name} of step 0:{step} in the recorded view")

    first = views[servers[0].name]
    h = step0(first, Kind.TRAIN_HEAD, "hidden", "h")
    lengths = step0(first, Kind.TRAIN_HEAD, "hidden", "lengths").long()
    with torch.random.fork_rng(devices=[]):
        client: Any = strat.build_node(specs[CLIENT_ID], run.data)
    sel = client.schedule.train_ids(0, 0)
    rows = client.train_rows

    def packed(a: np.ndarray, shift: int = 0) -> np.ndarray:
        if shift:
            a = np.concatenate([a[:, shift:], np.full((len(a), shift), IGNORE)], axis=1)
        return pack(torch.as_tensor(a[:, : int(lengths.max())]).unsqueeze(-1), lengths).squeeze(-1).numpy()

    truth, ids = packed(rows.labels[sel], shift=1), packed(rows.ids[sel])
    if len(truth) != len(h):
        raise Skipped("the recorded step 0:0 is not the client's first batch (views of a resumed run?)")
    labelled = truth != IGNORE
    p = cfg.params
    _, body, tail = build_parts(strat.model_path(), dtype=p.dtype, split=p.split, tail=p.tail_blocks,
                                lora=strat.lora_spec(), seed=cfg.seed)
    lm_head: Any = tail.lm_head
    vocab = int(lm_head.weight.shape[0])
    chance = 1.0 / vocab
    out = []
    common = {"tokens_scored": int(labelled.sum()), "vocabulary": vocab, "tail_blocks": p.tail_blocks}
    n_lab = int(labelled.sum())
    on = f"the {n_lab} response tokens of the client's first batch (step 1); chance: 1 / vocabulary"
    cost = vocab * int(h.shape[1]) * int(labelled.sum())
    if cost <= MAX_JACOBIAN:
        rates = {}
        for s in servers:
            g = step0(views[s.name], Kind.TRAIN_BODY_GRAD, "grad", "g")
            guess = labels_from_gradient(h_in=h, lengths=lengths, grad=g, body=body, tail=tail,
                                         labelled=labelled if cfg.strategy == "ushape-p3eft" else None)
            rates[s.name] = float((guess[labelled] == truth[labelled]).mean())
        out.append(AttackResult("ushape_label_gradient", "response tokens named (step 1, best server)",
                                max(rates.values()), chance, threat="model server: the head's release and the "
                                "gradient (ushape-p3eft: its piece, told the labelled positions) it received, "
                                "the pretrained tail", details={**common, "per_server": rates},
                                ci=wilson(round(max(rates.values()) * n_lab), n_lab), measured_on=on))
    if cfg.strategy == "ushape-p3eft":
        clean = {k: v.detach().clone() for k, v in body_adapters(body).items()}
        sent = {}
        for step in (0, 1):
            for e, a in first.select(kind=Kind.TRAIN_HEAD, record="adapter", phase="train"):
                if (e.get("epoch"), e.get("step")) == (0, step):
                    sent[e["name"]] = torch.as_tensor(np.array(a))
        if set(clean) <= set(sent):
            guess = labels_from_update(h_in=h, lengths=lengths, clean=clean, second=sent, body=body, tail=tail)
            out.append(AttackResult("ushape_label_update", "response tokens named from the adapters' first update",
                                    float((guess[labelled] == truth[labelled]).mean()), chance,
                                    threat="model server: the body adapters of the first two requests, the clean "
                                    "initial ones (built from the seed), its forward", details={
                                        **common, "theta_noise": p.theta_noise},
                                    ci=wilson(int((guess[labelled] == truth[labelled]).sum()), n_lab), measured_on=on))
    if p.split == 0:
        from parties.llm.ushape.parts import load_causal_lm

        lm: Any = load_causal_lm(strat.model_path(), dtype=p.dtype)
        table = lm.get_input_embeddings().weight.detach().float()
        guess = tokens_nearest(h, table)
        out.append(AttackResult("ushape_tokens_nearest", "prompt and response tokens named from the head's release",
                                float((guess == ids).mean()), chance, threat="model server: the head's release "
                                "(split 0: the embeddings, ± dχ), the pretrained embedding table",
                                details={"eta": p.eta, "tokens": len(ids)},
                                ci=wilson(int((guess == ids).sum()), int(np.size(ids))),
                                measured_on=f"the {int(np.size(ids))} prompt and response tokens of the client's "
                                            "first batch; chance: 1 / vocabulary"))
    if not out:
        raise Skipped(f"the label attack's Jacobians ({cost:.1e} numbers) exceed the report's {MAX_JACOBIAN:.0e}; "
                      "split > 0 has no token attack here")
    return out
