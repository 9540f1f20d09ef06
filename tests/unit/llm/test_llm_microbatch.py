"""The model server's ``micro_batch`` (rows per pass) and shared forward: forward activations and the
private-backprop VJPs equal the whole-batch results, and dense pieces (m >= 2) share one forward."""

from __future__ import annotations

import pytest
import torch

from parties.llm.common.arch import arch_of
from parties.llm.common.backbone import load_encoder, load_tokenizer
from parties.llm.common.lora import lora_spec_for
from parties.llm.p3eft.adapters import LoraEncoder, init_adapters
from parties.llm.p3eft.private_backprop import PER_EXAMPLE, split_gradient
from vfl.core.rng import NoiseSource

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
TEXTS = ["a gripping film", "the plot is thin and the jokes fall flat", "dull", "one of the best movies",
         "tedious, overlong and painfully predictable"]


@pytest.fixture(scope="module")
def setup(llama):
    path = llama
    batch = load_tokenizer(path)(TEXTS, padding=True, return_tensors="pt")
    return path, batch["input_ids"], batch["attention_mask"].sum(1)


def _server(path, micro_batch):
    model = load_encoder(path)
    return LoraEncoder(model, lora_spec_for(arch_of(model), rank=2, alpha=4.0), pooling="last",
                       micro_batch=micro_batch)


@pytest.mark.parametrize("m", [2, 3, PER_EXAMPLE])
def test_micro_batched_server_equals_the_whole_batch(setup, m):
    path, ids, lengths = setup
    whole, micro = _server(path, 0), _server(path, 2)
    gen = torch.Generator().manual_seed(0)
    adapter = {k: v if ".lora_A." in k else 0.1 * torch.randn(v.shape, generator=gen)
               for k, v in init_adapters(whole.shapes, generator=gen).items()}
    torch.testing.assert_close(micro.forward(ids, lengths, adapter), whole.forward(ids, lengths, adapter))
    g_h = 0.01 * torch.randn(len(TEXTS), 32, generator=gen)
    pieces, _ = split_gradient(g_h, m=m, std=0.3, noise=NoiseSource.seeded("test-micro", m))
    whole.passes = micro.passes = 0
    a = whole.backprop_many(ids, lengths, adapter, pieces)
    b = micro.backprop_many(ids, lengths, adapter, pieces)
    scale = max(float(t.abs().max()) for ga in a for t in ga.values())  # float32 sums in another order
    for ga, gb in zip(a, b, strict=True):
        for name in ga:
            torch.testing.assert_close(gb[name], ga[name], rtol=1e-4, atol=1e-5 * scale)
    if m == PER_EXAMPLE:  # disjoint rows: one example per piece, whatever the micro-batch
        assert whole.passes == micro.passes == len(TEXTS)
    else:  # dense pieces share the forward: one pass per micro-batch for all m pieces
        assert whole.passes == 1 and micro.passes == 3
        singles = [whole.backprop(ids, lengths, adapter, p) for p in pieces]  # one forward per piece (old path)
        for ga, gs in zip(a, singles, strict=True):
            for name in ga:
                torch.testing.assert_close(gs[name], ga[name], rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("m", [1, 2])
def test_a_training_forward_keeps_its_graph_for_the_steps_backprop(setup, m):
    """One forward per step, not two: the backprop that follows a training forward (same key, inputs and
    adapters) reuses its graph and gives the gradients a fresh forward gives (the control: the server
    without the kept graph runs two passes). Other adapters in between, or another key: a fresh forward."""
    path, ids, lengths = setup
    kept, fresh = _server(path, 0), _server(path, 0)
    gen = torch.Generator().manual_seed(1)
    adapter = {k: v if ".lora_A." in k else 0.1 * torch.randn(v.shape, generator=gen)
               for k, v in init_adapters(kept.shapes, generator=gen).items()}
    g_h = 0.01 * torch.randn(len(TEXTS), 32, generator=gen)
    pieces, _ = split_gradient(g_h, m=m, std=0.3, noise=NoiseSource.seeded("test-kept", m)) if m > 1 else (g_h[None], 0)
    h = kept.forward(ids, lengths, adapter, keep=(0, 0, 0))
    torch.testing.assert_close(h, fresh.forward(ids, lengths, adapter))
    got = kept.backprop_many(ids, lengths, adapter, pieces, keep=(0, 0, 0))
    want = fresh.backprop_many(ids, lengths, adapter, pieces)
    assert kept.passes == 1 and fresh.passes == 2
    scale = max(float(t.abs().max()) for g in want for t in g.values())
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys() and len(a) > 2
        for name in a:
            torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6 * scale)
    other = {k: v + 0.01 for k, v in adapter.items()}
    kept.forward(ids, lengths, adapter, keep=(0, 1, 0))
    moved = kept.backprop_many(ids, lengths, other, pieces, keep=(0, 1, 0))  # the slots no longer hold `adapter`
    assert kept.passes == 3  # a fresh forward for `other`
    for a, b in zip(moved, fresh.backprop_many(ids, lengths, other, pieces), strict=True):
        for name in a:
            torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6 * scale)
