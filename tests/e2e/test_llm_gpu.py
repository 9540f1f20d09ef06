"""On a CUDA device (skipped without one): a P3EFT step and a SAP step with the model on the GPU in
bfloat16 (``train.device: cuda``, ``params.dtype: bf16``), the client/customer on the same device, and
the model server's float32 VJP on the GPU with the cotangent pieces that arrive on the CPU."""

from __future__ import annotations

import json

import pytest
import torch

from parties.llm.common.tiny import tiny_lm_dir
from simulations.cli.runner import execute, resolve_config

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _run(strategy, path, out, **params):
    raw = {"name": f"{strategy}-cuda", "strategy": strategy, "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
           "data": {"train_subsample": 32, "test_subsample": 16},
           "train": {"epochs": 1, "batch_size": 16, "optimizer": "adam", "lr": 1e-3, "device": "cuda"},
           "params": {"max_len": 16, "model_dir": path, "dtype": "bf16", "lora_rank": 2, **params}}
    execute(resolve_config(raw), out_dir=out, progress=False)
    return json.loads((out / "summary.json").read_text())


def test_p3eft_step_on_cuda_in_bf16(tmp_path):
    path = tiny_lm_dir(tmp_path / "llama", "llama", dtype="bfloat16")
    s = _run("p3eft", path, tmp_path / "p3eft", alpha=1.0, leak_window=16)
    assert s["bytes_by_kind"]["train.backprop"]["messages"] == 2 * 2 * 2 and 0.0 <= s["test_acc"] <= 1.0


@pytest.mark.parametrize("frozen", [True, False])
def test_sap_step_on_cuda_in_bf16(tmp_path, frozen):
    path = tiny_lm_dir(tmp_path / "llama", "llama", dtype="bfloat16")
    s = _run("sap", path, tmp_path / "sap", split=1, frozen_bottom=frozen, eta=100.0, eia_samples=2, eia_steps=5)
    assert ("train.bottom_grad" in s["bytes_by_kind"]) is (not frozen) and 0.0 <= s["ep_eia"] <= 1.0


def test_private_backprop_on_cuda_recombines_within_the_bound(tmp_path):
    from parties.llm.common.arch import arch_of
    from parties.llm.common.backbone import load_encoder, load_tokenizer
    from parties.llm.common.lora import lora_spec_for
    from parties.llm.p3eft.adapters import LoraEncoder, init_adapters
    from parties.llm.p3eft.private_backprop import recombine, split_gradient
    from tests.unit.llm.test_llm_dtype import BOUND, TEXTS, _rel
    from vfl.core.rng import NoiseSource

    path = tiny_lm_dir(tmp_path / "llama", "llama", dtype="bfloat16")
    model = load_encoder(path, dtype="bf16")
    server = LoraEncoder(model, lora_spec_for(arch_of(model), rank=2, alpha=4.0), pooling="last", device="cuda")
    gen = torch.Generator().manual_seed(0)
    adapter = {k: v if ".lora_A." in k else 0.1 * torch.randn(v.shape, generator=gen)
               for k, v in init_adapters(server.shapes, generator=gen).items()}
    batch = load_tokenizer(path)(TEXTS, padding=True, return_tensors="pt")
    ids, lengths = batch["input_ids"], batch["attention_mask"].sum(1)
    g_h = 0.01 * torch.randn(len(TEXTS), model.config.hidden_size, generator=gen)  # on the CPU, as off the wire
    plain = server.backprop(ids, lengths, adapter, g_h)
    pieces, alphas = split_gradient(g_h, m=2, std=30 * float(g_h.pow(2).mean().sqrt()),
                                    noise=NoiseSource.seeded("test-llm-gpu", 1))
    private = recombine([server.backprop(ids, lengths, adapter, p) for p in pieces], alphas)
    assert all(t.device.type == "cpu" for t in plain.values()) and _rel(private, plain) < BOUND
