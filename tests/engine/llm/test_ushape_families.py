"""``ushape-lora`` trains every causal family of ``vfl tiny-lm`` exactly as the model trained whole in one
process: the same adapters (the parts' seeded LoRA, B = 0) stepped by the model's own ``ForCausalLM.forward``
and its loss on the same batches give the same step losses, the same last-step LoRA gradients and the same
adapters after two steps. Granite's ``logits_scaling`` and Gemma 2's ``final_logit_softcapping`` (after the
LM head) are where the tail used to differ (``tests/unit/llm/test_ushape_units.py`` keeps that control)."""

from __future__ import annotations

import pytest
import torch

import strategies  # noqa: F401
from parties.llm.common.tiny import ENCODERS, FAMILIES
from parties.llm.ushape.wire import CLIENT_ID, SERVER_ID
from simulations.data.source import ConfigDataSource
from strategies.base.llm import optimizer_factory
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
CAUSAL = sorted(set(FAMILIES) - set(ENCODERS))
STEPS = 2


def _config(model_dir: str) -> dict:
    return {"name": "ushape-family", "strategy": "ushape-lora", "dataset": "tiny-instruct", "num_parties": 1,
            "seed": 3, "data": {"train_subsample": 4 * STEPS, "test_subsample": 4},
            "train": {"epochs": 1, "batch_size": 4, "optimizer": "adamw", "lr": 1e-2, "log_every_steps": 1},
            "params": {"model_dir": model_dir, "max_len": 24, "lora_rank": 2, "lora_targets": ["all-linear"],
                       "gen_samples": 0}}


def _whole_model_training(model_dir: str, cfg, client) -> tuple[list[float], tuple, dict[str, torch.Tensor]]:
    """The same parts (``build_split``: the same seeded adapters) trained as ONE model through its own forward."""
    from parties.llm.ushape.build import build_split
    from parties.llm.ushape.instruct import response_nll
    from parties.llm.ushape.parts import real_mask
    from strategies.ushape import UShapeLora

    p = cfg.params
    lm, parts = build_split(model_dir, dtype="fp32", split=p.split, tail=p.tail_blocks,
                            lora=UShapeLora(cfg).lora_spec(), seed=cfg.seed)
    params = [q for n, q in lm.named_parameters() if "lora_" in n]
    opt = optimizer_factory(cfg.train, STEPS)(params)
    rows, losses = client.train_rows, []
    for step in range(STEPS):
        sel = client.schedule.train_ids(0, step)
        width = int(rows.lengths[sel].max())
        mask = real_mask(torch.as_tensor(rows.lengths[sel]), width)
        logits = lm(input_ids=torch.as_tensor(rows.ids[sel][:, :width]), attention_mask=mask).logits
        nll, count = response_nll(logits, torch.as_tensor(rows.labels[sel][:, :width]))
        opt.zero_grad(set_to_none=True)
        (nll / count).backward()
        opt.step()
        losses.append(float(nll.detach()) / count)
    grads = {f"{name}.{n}": q.grad.clone() for name, part in zip(("head", "body", "tail"), parts, strict=True)
             for n, q in part.named_parameters() if "lora_" in n and q.grad is not None}
    return losses, parts, grads


@pytest.mark.parametrize("family", CAUSAL)
def test_split_training_equals_the_model_trained_whole(tiny_lm, family):
    model_dir = tiny_lm(family)
    cfg = load_run_config(_config(model_dir))
    engine = Engine(cfg, InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False)
    result = engine.run()
    nodes = {nid: n for h in engine.transport.hosts.values() for nid, n in h.nodes.items()}
    client, server = nodes[CLIENT_ID], nodes[SERVER_ID]
    split_losses = [loss for _, loss in result.history[0]["step_loss"]]

    losses, (head, body, tail), grads = _whole_model_training(model_dir, cfg, client)

    assert len(split_losses) == STEPS and split_losses == pytest.approx(losses, rel=1e-5)
    split_grads = {f"{name}.{n}": q.grad for name, part in (("head", client.head), ("body", server.body),
                                                            ("tail", client.tail))
                   for n, q in part.named_parameters() if "lora_" in n and q.grad is not None}
    assert split_grads.keys() == grads.keys() and len(grads) > 3
    for k, g in grads.items():  # the second step's gradient, after one identical update
        torch.testing.assert_close(split_grads[k], g, rtol=1e-4, atol=1e-6 * float(g.abs().max()) + 1e-12, msg=k)
    for mine, ref in ((client.head, head), (server.body, body), (client.tail, tail)):
        for k, v in ref.state_dict().items():
            if "lora_" in k:
                torch.testing.assert_close(mine.state_dict()[k], v, rtol=1e-4, atol=1e-6, msg=k)
