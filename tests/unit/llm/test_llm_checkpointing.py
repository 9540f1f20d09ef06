"""``params.gradient_checkpointing`` on the model servers: activations and every piece's VJP equal the
non-checkpointed path (fp32 tolerance), also with bf16 weights and micro-batches, and the forward
keeps far fewer activation bytes for the backward (counted with saved-tensor hooks)."""

from __future__ import annotations

import pytest
import torch

from parties.llm.common.arch import arch_of
from parties.llm.common.backbone import load_encoder, load_tokenizer
from parties.llm.common.lora import lora_spec_for
from parties.llm.common.tiny import tiny_gpt2_dir, tiny_lm_dir
from parties.llm.p3eft.adapters import LoraEncoder, init_adapters
from parties.llm.p3eft.private_backprop import split_gradient
from simulations.benchmarks.llm_server_passes import saved_activation_bytes as saved_bytes
from vfl.core.rng import NoiseSource

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
TEXTS = ["a gripping film", "the plot is thin and the jokes fall flat", "dull", "one of the best movies",
         "tedious, overlong and painfully predictable"]
POOLING = {"llama": "last", "mistral": "last", "gpt2": "last", "t5": "mean", "deberta_v2": "mean"}


def _model_dir(root, family, dtype="float32"):
    return tiny_gpt2_dir(root) if family == "gpt2" else tiny_lm_dir(root, family, dtype=dtype)


def _server(path, family, *, checkpointing, dtype="fp32", micro_batch=0):
    model = load_encoder(path, dtype=dtype)
    return LoraEncoder(model, lora_spec_for(arch_of(model), rank=2, alpha=4.0), pooling=POOLING[family],
                       micro_batch=micro_batch, checkpointing=checkpointing)


def _inputs(path):
    batch = load_tokenizer(path)(TEXTS, padding=True, return_tensors="pt")
    return batch["input_ids"], batch["attention_mask"].sum(1)


def _adapter(server):
    gen = torch.Generator().manual_seed(0)
    return {k: v if ".lora_A." in k else 0.1 * torch.randn(v.shape, generator=gen)
            for k, v in init_adapters(server.shapes, generator=gen).items()}


@pytest.mark.parametrize(("family", "dtype", "micro_batch"), [
    ("llama", "fp32", 0), ("llama", "bf16", 2), ("mistral", "fp32", 0), ("gpt2", "fp32", 3),
    ("t5", "fp32", 0), ("deberta_v2", "fp32", 2)])
def test_checkpointed_server_equals_the_plain_one(tmp_path, family, dtype, micro_batch):
    path = _model_dir(tmp_path, family)
    ids, lengths = _inputs(path)
    plain = _server(path, family, checkpointing=False, dtype=dtype, micro_batch=micro_batch)
    ckpt = _server(path, family, checkpointing=True, dtype=dtype, micro_batch=micro_batch)
    assert all(getattr(b.forward, "checkpointed", False) for b in arch_of(ckpt.encoder).blocks(ckpt.encoder))
    adapter = _adapter(plain)
    torch.testing.assert_close(ckpt.forward(ids, lengths, adapter), plain.forward(ids, lengths, adapter))
    dim = plain.forward(ids, lengths, adapter).shape[1]
    g_h = 0.01 * torch.randn(len(TEXTS), dim, generator=torch.Generator().manual_seed(1))
    pieces, _ = split_gradient(g_h, m=2, std=0.3, noise=NoiseSource.seeded("test-ckpt", 2))
    a = plain.backprop_many(ids, lengths, adapter, pieces)  # two pieces: retain_graph across backwards
    b = ckpt.backprop_many(ids, lengths, adapter, pieces)
    scale = max(float(t.abs().max()) for ga in a for t in ga.values())
    assert scale > 0
    for ga, gb in zip(a, b, strict=True):
        for name in ga:
            torch.testing.assert_close(gb[name], ga[name], rtol=1e-5, atol=1e-6 * scale)


def test_checkpointing_keeps_fewer_activations(tmp_path):
    path = _model_dir(tmp_path, "llama")
    ids, lengths = _inputs(path)
    plain = _server(path, "llama", checkpointing=False)
    ckpt = _server(path, "llama", checkpointing=True)
    plain.load(_adapter(plain))
    ckpt.load(_adapter(ckpt))
    full, kept = saved_bytes(plain, ids, lengths), saved_bytes(ckpt, ids, lengths)
    hidden = ids.numel() * plain.encoder.config.hidden_size * 4  # one (B, T, d) float32 tensor
    assert kept < full / 3  # only each block's input (and what runs outside the blocks) is kept
    assert kept >= len(arch_of(ckpt.encoder).blocks(ckpt.encoder)) * hidden  # at least the blocks' inputs


def _llama_saved(tmp_path, *, layers, checkpointing, d=64, f=160, rank=4, batch=2, width=32):
    """Saved-activation bytes of a random Llama (all-linear LoRA, sdpa attention) on full-length rows."""
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(vocab_size=100, hidden_size=d, intermediate_size=f, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2 * width)
    cfg._attn_implementation = "sdpa"
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = LlamaModel(cfg).eval()
    server = LoraEncoder(model, lora_spec_for(arch_of(model), rank=rank, alpha=8.0, targets=("all-linear",)),
                         pooling="last", checkpointing=checkpointing)
    server.load(_adapter(server))
    ids = torch.randint(0, 100, (batch, width), generator=torch.Generator().manual_seed(0))
    return saved_bytes(server, ids, torch.full((batch,), width))


def test_docs_activation_formula(tmp_path):
    """docs/llm-p3eft.md's 7B arithmetic: per token and block, float32 (8d + 4f + 7r + 6) values kept without
    checkpointing (all-linear LoRA of rank r), d with it (the block's input)."""
    d, f, rank, tokens = 64, 160, 4, 2 * 32
    for checkpointing, floats in ((False, 8 * d + 4 * f + 7 * rank + 6), (True, d)):
        per_block = (_llama_saved(tmp_path, layers=4, checkpointing=checkpointing)
                     - _llama_saved(tmp_path, layers=2, checkpointing=checkpointing)) / 2 / tokens
        assert per_block == pytest.approx(4 * floats, rel=0.05), checkpointing


@pytest.mark.parametrize(("family", "checkpointing", "micro_batch"), [
    ("llama", False, 0), ("llama", True, 2), ("gpt2", False, 3), ("t5", True, 0), ("deberta_v2", False, 2)])
def test_batched_vjps_equal_one_backward_per_piece(tmp_path, family, checkpointing, micro_batch):
    """``is_grads_batched`` (one vmapped backward for the k pieces, the default) equals one backward each."""
    path = _model_dir(tmp_path, family)
    ids, lengths = _inputs(path)
    batched = _server(path, family, checkpointing=checkpointing, micro_batch=micro_batch)
    single = _server(path, family, checkpointing=checkpointing, micro_batch=micro_batch)
    single.batched_vjp = False
    assert batched.batched_vjp
    adapter = _adapter(batched)
    dim = batched.forward(ids, lengths, adapter).shape[1]
    g_h = 0.01 * torch.randn(len(TEXTS), dim, generator=torch.Generator().manual_seed(2))
    pieces, _ = split_gradient(g_h, m=3, std=0.3, noise=NoiseSource.seeded("test-batched", 3))
    a, b = single.backprop_many(ids, lengths, adapter, pieces), batched.backprop_many(ids, lengths, adapter, pieces)
    assert len(a) == len(b) == 3
    scale = max(float(t.abs().max()) for ga in a for t in ga.values())
    assert scale > 0
    for ga, gb in zip(a, b, strict=True):
        for name in ga:
            torch.testing.assert_close(gb[name], ga[name], rtol=1e-5, atol=1e-6 * scale)


def test_server_passes_benchmark_runs():
    """``simulations.benchmarks.llm_server_passes`` (the docs' numbers) runs and sees the saving."""
    from simulations.benchmarks.llm_server_passes import measure

    rows = measure(hidden=32, blocks=2, batch=2, width=8, pieces=2, rank=2, repeats=1)
    by = {(r["checkpointing"], r["batched_vjp"]): r["saved_bytes"] for r in rows}
    assert len(by) == 4 and by[True, True] == by[True, False] < by[False, True] == by[False, False]


def test_batched_vjps_fall_back_to_one_backward_per_piece(tmp_path, monkeypatch):
    """An op without a vmap rule on the server's device (as a GPU kernel may lack): the batched backward
    raises, the server warns once, re-runs the forward and answers with one backward per piece."""
    path = _model_dir(tmp_path, "llama")
    ids, lengths = _inputs(path)
    server, reference = _server(path, "llama", checkpointing=True), _server(path, "llama", checkpointing=True)
    reference.batched_vjp = False
    adapter = _adapter(server)
    pieces, _ = split_gradient(0.01 * torch.randn(len(TEXTS), 32, generator=torch.Generator().manual_seed(3)),
                               m=2, std=0.3, noise=NoiseSource.seeded("test-fallback", 2))
    grad = torch.autograd.grad

    def no_vmap(*args, **kwargs):
        if kwargs.get("is_grads_batched"):
            raise RuntimeError("Batching rule not implemented for aten::some_kernel")
        return grad(*args, **kwargs)

    monkeypatch.setattr(torch.autograd, "grad", no_vmap)
    with pytest.warns(RuntimeWarning, match="batched VJPs failed"):
        got = server.backprop_many(ids, lengths, adapter, pieces)
    assert not server.batched_vjp
    for ga, gb in zip(reference.backprop_many(ids, lengths, adapter, pieces), got, strict=True):
        for name in ga:
            torch.testing.assert_close(gb[name], ga[name])
