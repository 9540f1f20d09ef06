"""T5 as an encoder-decoder on the model servers (``params.t5_stack: encoder-decoder``, P3EFT's Flan-T5):
h is the vector T5ForSequenceClassification feeds its head (the authors' model), LoRA lands in the
encoder and in the decoder's self- and cross-attention, private backprop recombines, P3EFT and
split-LoRA train through the real nodes (fp32 and bf16), and the key is validated."""

from __future__ import annotations

import re

import pytest
import torch

import strategies  # noqa: F401
from parties.llm.common.arch import ALL_LINEAR, arch_of
from parties.llm.common.backbone import load_encoder, load_tokenizer, pool
from parties.llm.common.lora import lora_spec_for
from parties.llm.p3eft.adapters import LoraEncoder, adapter_shapes, init_adapters
from tests.support.p3eft_step import check_private_backprop_step

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
ED = "encoder-decoder"
TEXTS = ["a gripping film", "the plot is thin and the jokes fall flat", "dull", "one of the best movies"]


def _batch(path):
    b = load_tokenizer(path)(TEXTS, padding=True, return_tensors="pt")
    return b["input_ids"], b["attention_mask"]


def test_h_is_the_vector_t5_for_sequence_classification_feeds_its_head(t5):
    """pooling last = T5ForSequenceClassification's sentence vector (decoder state at the text's final </s>);
    pooling cls = the decoder's first generation step (start token only, cross-attending the encoder)."""
    from transformers import T5ForSequenceClassification, T5Model

    model = load_encoder(t5, stack=ED)
    arch = arch_of(model)
    assert arch.kind == ED and arch.default_pooling == "last" and not arch.causal
    cfg = model.config
    eos = 1  # a T5 tokenizer appends </s>: one per text, then padding (id 0)
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([7, 4, 9, 5])
    ids = torch.zeros(4, 9, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        ids[i, : n - 1] = torch.randint(3, cfg.vocab_size, (n - 1,), generator=g)
        ids[i, n - 1] = eos
    mask = (ids != 0).long()
    clf_cfg = cfg.__class__.from_dict({**cfg.to_dict(), "eos_token_id": eos, "num_labels": 2})
    clf = T5ForSequenceClassification(clf_cfg).eval()
    clf.transformer.load_state_dict(model.model.state_dict())
    seen = []
    clf.classification_head.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    with torch.no_grad():
        clf(input_ids=ids, attention_mask=mask)
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(pool(hidden, mask, "last"), seen[0], rtol=1e-5, atol=1e-6)
        first = T5Model.forward(model.model, input_ids=ids, attention_mask=mask,
                                decoder_input_ids=torch.zeros(4, 1, dtype=torch.long)).last_hidden_state[:, 0]
        torch.testing.assert_close(pool(hidden, mask, "cls"), first, rtol=1e-5, atol=1e-6)
        enc_only = load_encoder(t5)(input_ids=ids, attention_mask=mask).last_hidden_state
    assert (pool(enc_only, mask, "last") - seen[0]).abs().max() > 1e-3  # control: the encoder alone is another h


@pytest.mark.parametrize("targets", [(), (ALL_LINEAR,)])
def test_lora_covers_encoder_and_decoder_self_and_cross_attention(t5, targets):
    from transformers import AutoConfig

    model = load_encoder(t5, stack=ED)
    spec = lora_spec_for(arch_of(model), rank=2, alpha=4.0, targets=targets)
    server = LoraEncoder(model, spec, pooling="last")
    shapes = adapter_shapes(AutoConfig.from_pretrained(t5), spec, stack=ED)
    assert shapes == server.shapes  # the client learns the decoder's slots from the config alone
    found = {m.groups() for n in shapes
             if (m := re.match(r"model\.(encoder|decoder)\.block\.\d+\.layer\.\d+\.(\w+)\.([qv])\.lora_", n))}
    assert {(s, a, p) for s, a in (("encoder", "SelfAttention"), ("decoder", "SelfAttention"),
                                   ("decoder", "EncDecAttention")) for p in "qv"} <= found
    enc_only = adapter_shapes(AutoConfig.from_pretrained(t5), spec)  # t5_stack: encoder (control)
    assert not any("decoder" in n for n in enc_only) and len(shapes) > len(enc_only)
    if targets:  # all-linear: also the feed-forward layers of both stacks, never the shared embedding
        assert any("decoder" in n and "DenseReluDense" in n for n in shapes)
        assert not any("shared" in n or "embed" in n for n in shapes)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_private_backprop_through_the_whole_t5_trains_a_step(t5, dtype):
    model = load_encoder(t5, dtype=dtype, stack=ED)
    spec = lora_spec_for(arch_of(model), rank=2, alpha=4.0)
    server = LoraEncoder(model, spec, pooling="last")
    ids, mask = _batch(t5)
    private = check_private_backprop_step(server, ids, mask, width=model.config.d_model, tag="test-t5-seq2seq")
    assert all(float(private[n].abs().sum()) > 0 for n in private if "EncDecAttention" in n)  # cross-attn learns


def test_checkpointing_and_micro_batches_are_exact_on_the_whole_t5(t5):
    """Gradient checkpointing wraps the decoder's blocks too (cross-attention inputs and all) and
    micro-batches split the rows: the same activations and VJPs as the plain path."""
    spec = lora_spec_for(arch_of(load_encoder(t5, stack=ED)), rank=2, alpha=4.0)
    plain = LoraEncoder(load_encoder(t5, stack=ED), spec, pooling="last")
    lean = LoraEncoder(load_encoder(t5, stack=ED), spec, pooling="last", checkpointing=True, micro_batch=3)
    assert sum(getattr(b.forward, "checkpointed", False) for b in arch_of(lean.encoder).blocks(lean.encoder)) == 6
    adapter = init_adapters(plain.shapes, generator=torch.Generator().manual_seed(1))
    adapter = {k: v if ".lora_A." in k else torch.full_like(v, 0.05) for k, v in adapter.items()}
    ids, mask = _batch(t5)
    lengths = mask.sum(1)
    g = torch.randn(len(ids), 32, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(lean.forward(ids, lengths, adapter), plain.forward(ids, lengths, adapter))
    want, got = plain.backprop(ids, lengths, adapter, g), lean.backprop(ids, lengths, adapter, g)
    for name, ref in want.items():
        torch.testing.assert_close(got[name], ref, rtol=1e-4, atol=1e-6)
