"""``params.dtype``: a bf16/fp16 model server keeps LoRA and gradients in float32, and P3EFT's private
backprop recombines to the server's plain backprop within float32 precision (the documented bound),
where backprop in the weights' own dtype (the old behaviour, the control) is off by ~20 % in bf16."""

from __future__ import annotations

import pytest
import torch

from parties.llm.common.arch import arch_of
from parties.llm.common.backbone import load_encoder, load_tokenizer, torch_dtype
from parties.llm.common.lora import lora_spec_for
from parties.llm.p3eft.adapters import LoraEncoder, init_adapters
from parties.llm.p3eft.private_backprop import recombine, split_gradient
from parties.llm.sap.split import bottom_state, build_bottom, split_encoder
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
TEXTS = ["a gripping film", "the plot is thin and the jokes fall flat", "dull", "one of the best movies of the year"]
BOUND = 1e-3  # relative error of the recombined gradient vs plain backprop on the same server (docs/llm.md)


@pytest.fixture(scope="module")
def path(tiny_lm):
    return tiny_lm("llama", dtype="bfloat16")


def _rel(a, b):
    return max(float((a[k] - b[k]).norm() / b[k].norm()) for k in b)


def _recombination_error(path, dtype, *, vjp_fp32):
    model = load_encoder(path, dtype=dtype)
    server = LoraEncoder(model, lora_spec_for(arch_of(model), rank=2, alpha=4.0), pooling="last", vjp_fp32=vjp_fp32)
    assert all(p.dtype == torch.float32 for p in server.slots.values())
    assert next(iter(server.frozen)).dtype == torch_dtype(dtype)
    gen = torch.Generator().manual_seed(0)
    adapter = {k: v if ".lora_A." in k else 0.1 * torch.randn(v.shape, generator=gen)
               for k, v in init_adapters(server.shapes, generator=gen).items()}
    batch = load_tokenizer(path)(TEXTS, padding=True, return_tensors="pt")
    ids, lengths = batch["input_ids"], batch["attention_mask"].sum(1)
    h = server.forward(ids, lengths, adapter)
    assert h.dtype == torch.float32 and next(iter(server.frozen)).dtype == torch_dtype(dtype)
    g_h = 0.01 * torch.randn(h.shape, generator=gen)
    plain = server.backprop(ids, lengths, adapter, g_h)
    assert next(iter(server.frozen)).dtype == torch_dtype(dtype)  # the upcast for the call is undone
    pieces, alphas = split_gradient(g_h, m=2, std=30 * float(g_h.pow(2).mean().sqrt()),  # the default noise
                                    noise=NoiseSource.seeded("test-llm-dtype", 1))
    private = recombine([server.backprop(ids, lengths, adapter, p) for p in pieces], alphas)
    return _rel(private, plain)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_private_backprop_recombines_within_the_bound_under_low_precision(path, dtype):
    assert _recombination_error(path, dtype, vjp_fp32=True) < BOUND


def test_control_backprop_in_bf16_breaks_the_recombination(path):
    """Why the VJPs run in float32: each random piece is 30x g_h, and bf16 rounds it (and every
    intermediate of its backward) to 8 bits; the recombination cancels the pieces and keeps their
    rounding as error."""
    assert _recombination_error(path, "bf16", vjp_fp32=False) > 0.05


def test_bf16_vendor_ships_a_float32_bottom_that_matches(path):
    model = load_encoder(path, dtype="bf16")
    batch = load_tokenizer(path)(TEXTS, padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    bottom, top = split_encoder(model, split=1, num_classes=2)
    config_json, state = bottom_state(bottom)  # numpy has no bfloat16: shipped upcast (exact)
    assert all(v.dtype.name == "float32" for v in state.values())
    rebuilt = build_bottom(config_json=config_json, split=1, state=state).eval()
    with torch.no_grad():
        torch.testing.assert_close(rebuilt.vocab, model.embed_tokens.weight.float(), rtol=0, atol=0)
        logits = top.eval()(rebuilt(ids, mask), mask)  # float32 reps into the bf16 top: cast, no crash
        want = top(bottom(ids, mask), mask)
    assert logits.dtype == torch.float32
    torch.testing.assert_close(logits, want, rtol=0.05, atol=0.05)  # customer fp32 vs vendor bf16 bottom


def test_unknown_dtype_is_named():
    with pytest.raises(ConfigError, match=r"params\.dtype.*fp32, bf16, fp16"):
        torch_dtype("int8")
