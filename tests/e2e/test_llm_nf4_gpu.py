"""On a CUDA device with bitsandbytes (skipped otherwise): ``params.quantization: nf4`` loads the model
servers' frozen weights in 4-bit NF4, a P3EFT step runs on them, and the float32 VJPs through the NF4
layers (their matmuls switched to float32 for a backprop call) recombine within the fp32 bound."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from parties.llm.common.tiny import tiny_lm_dir

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
              pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None, reason="needs bitsandbytes")]


def test_p3eft_step_with_nf4_servers_on_cuda(tmp_path):
    from parties.llm.p3eft.server import ModelServer
    from simulations.cli.runner import execute, resolve_config
    from vfl.runtime.transport.inprocess import InProcessTransport

    path = tiny_lm_dir(tmp_path / "llama", "llama", dtype="bfloat16")
    raw = {"name": "p3eft-nf4", "strategy": "p3eft", "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
           "data": {"train_subsample": 32, "test_subsample": 16},
           "train": {"epochs": 1, "batch_size": 16, "optimizer": "adam", "lr": 1e-3, "device": "cuda"},
           "params": {"max_len": 16, "model_dir": path, "dtype": "bf16", "lora_rank": 2, "alpha": 1.0,
                      "leak_window": 16, "quantization": "nf4"}}
    transport = InProcessTransport()
    execute(resolve_config(raw), out_dir=tmp_path / "run", progress=False, transport=transport)
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    servers = [n for h in transport.hosts.values() for n in h.nodes.values() if isinstance(n, ModelServer)]
    assert servers and all(srv.model.quantized for srv in servers)  # the NF4 layers are there
    assert all(type(m.weight).__name__ == "Params4bit" for srv in servers for m in srv.model.quantized)
    assert s["bytes_by_kind"]["train.backprop"]["messages"] == 2 * 2 * 2 and 0.0 <= s["test_acc"] <= 1.0


def test_private_backprop_through_nf4_recombines_within_the_bound(tmp_path):
    from parties.llm.common.arch import arch_of
    from parties.llm.common.backbone import load_encoder, load_tokenizer
    from parties.llm.common.lora import lora_spec_for
    from parties.llm.p3eft.adapters import LoraEncoder, init_adapters
    from parties.llm.p3eft.private_backprop import recombine, split_gradient
    from tests.unit.llm.test_llm_dtype import BOUND, TEXTS, _rel
    from vfl.core.rng import NoiseSource

    path = tiny_lm_dir(tmp_path / "llama", "llama", dtype="bfloat16")
    model = load_encoder(path, dtype="bf16", quantization="nf4", device="cuda")
    server = LoraEncoder(model, lora_spec_for(arch_of(model), rank=2, alpha=4.0), pooling="last", device="cuda")
    assert server.quantized
    gen = torch.Generator().manual_seed(0)
    adapter = {k: v if ".lora_A." in k else 0.1 * torch.randn(v.shape, generator=gen)
               for k, v in init_adapters(server.shapes, generator=gen).items()}
    batch = load_tokenizer(path)(TEXTS, padding=True, return_tensors="pt")
    ids, lengths = batch["input_ids"], batch["attention_mask"].sum(1)
    g_h = 0.01 * torch.randn(len(TEXTS), model.config.hidden_size, generator=gen)
    plain = server.backprop(ids, lengths, adapter, g_h)
    pieces, alphas = split_gradient(g_h, m=2, std=30 * float(g_h.pow(2).mean().sqrt()),
                                    noise=NoiseSource.seeded("test-llm-nf4", 1))
    private = recombine([server.backprop(ids, lengths, adapter, p) for p in pieces], alphas)
    assert _rel(private, plain) < BOUND
    assert all(m.compute_dtype == torch.bfloat16 for m in server.quantized)  # put back after each call
