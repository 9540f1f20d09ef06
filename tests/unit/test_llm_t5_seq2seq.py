"""T5 as an encoder-decoder on the model servers (``params.t5_stack: encoder-decoder``, P3EFT's Flan-T5):
h is the vector T5ForSequenceClassification feeds its head (the authors' model), LoRA lands in the
encoder and in the decoder's self- and cross-attention, private backprop recombines, P3EFT and
split-LoRA train through the real nodes (fp32 and bf16), and the key is validated."""

from __future__ import annotations

import math
import re

import pytest
import torch

import strategies  # noqa: F401
from parties.llm.common.arch import ALL_LINEAR, arch_of
from parties.llm.common.backbone import load_encoder, load_tokenizer, pool
from parties.llm.common.lora import lora_spec_for
from parties.llm.p3eft.adapters import LoraEncoder, adapter_shapes, init_adapters
from parties.llm.p3eft.server import ModelServer
from tests.p3eft_step import check_private_backprop_step
from tests.tiny_lms import tiny_gpt2_dir, tiny_lm_dir
from tests.unit.test_sap_nodes import ToySentiment
from vfl.core.errors import ConfigError
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
ED = "encoder-decoder"
TEXTS = ["a gripping film", "the plot is thin and the jokes fall flat", "dull", "one of the best movies"]


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    return tiny_lm_dir(tmp_path_factory.mktemp("t5") / "t5", "t5")


def _batch(path):
    b = load_tokenizer(path)(TEXTS, padding=True, return_tensors="pt")
    return b["input_ids"], b["attention_mask"]


def test_h_is_the_vector_t5_for_sequence_classification_feeds_its_head(t5_dir):
    """pooling last = T5ForSequenceClassification's sentence vector (decoder state at the text's final </s>);
    pooling cls = the decoder's first generation step (start token only, cross-attending the encoder)."""
    from transformers import T5ForSequenceClassification, T5Model

    model = load_encoder(t5_dir, stack=ED)
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
        enc_only = load_encoder(t5_dir)(input_ids=ids, attention_mask=mask).last_hidden_state
    assert (pool(enc_only, mask, "last") - seen[0]).abs().max() > 1e-3  # control: the encoder alone is another h


@pytest.mark.parametrize("targets", [(), (ALL_LINEAR,)])
def test_lora_covers_encoder_and_decoder_self_and_cross_attention(t5_dir, targets):
    from transformers import AutoConfig

    model = load_encoder(t5_dir, stack=ED)
    spec = lora_spec_for(arch_of(model), rank=2, alpha=4.0, targets=targets)
    server = LoraEncoder(model, spec, pooling="last")
    shapes = adapter_shapes(AutoConfig.from_pretrained(t5_dir), spec, stack=ED)
    assert shapes == server.shapes  # the client learns the decoder's slots from the config alone
    found = {m.groups() for n in shapes
             if (m := re.match(r"model\.(encoder|decoder)\.block\.\d+\.layer\.\d+\.(\w+)\.([qv])\.lora_", n))}
    assert {(s, a, p) for s, a in (("encoder", "SelfAttention"), ("decoder", "SelfAttention"),
                                   ("decoder", "EncDecAttention")) for p in "qv"} <= found
    enc_only = adapter_shapes(AutoConfig.from_pretrained(t5_dir), spec)  # t5_stack: encoder (control)
    assert not any("decoder" in n for n in enc_only) and len(shapes) > len(enc_only)
    if targets:  # all-linear: also the feed-forward layers of both stacks, never the shared embedding
        assert any("decoder" in n and "DenseReluDense" in n for n in shapes)
        assert not any("shared" in n or "embed" in n for n in shapes)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_private_backprop_through_the_whole_t5_trains_a_step(t5_dir, dtype):
    model = load_encoder(t5_dir, dtype=dtype, stack=ED)
    spec = lora_spec_for(arch_of(model), rank=2, alpha=4.0)
    server = LoraEncoder(model, spec, pooling="last")
    ids, mask = _batch(t5_dir)
    private = check_private_backprop_step(server, ids, mask, width=model.config.d_model, tag="test-t5-seq2seq")
    assert all(float(private[n].abs().sum()) > 0 for n in private if "EncDecAttention" in n)  # cross-attn learns


def _config(strategy, path, **params):
    base = {"max_len": 16, "lora_rank": 2, "leak_window": 16, "model_dir": path, "t5_stack": ED}
    return load_run_config({"strategy": strategy, "num_parties": 1, "seed": 3,
                            "train": {"epochs": 1, "batch_size": 16, "optimizer": "adam", "lr": 1e-2},
                            "params": {**base, **params}})


@pytest.mark.parametrize("strategy,params", [("p3eft", {"alpha": 1.0}), ("p3eft", {"dtype": "bf16"}),
                                             ("split-lora", {})])
def test_p3eft_and_split_lora_train_the_whole_t5_over_the_nodes(t5_dir, strategy, params):
    """Real nodes, in-process: the loss is finite, every adapter's B (zero at init) moved, decoder
    ones included, and the θ-difference attack and leak report still run on what the servers kept."""
    transport = InProcessTransport()
    result = Engine(_config(strategy, t5_dir, **params), transport, ToySentiment(num_train=32, num_test=16),
                    progress=False).run()
    found = [n for h in transport.hosts.values() for n in h.nodes.values()]
    server = next(n for n in found if isinstance(n, ModelServer))
    client = next(n for n in found if not isinstance(n, ModelServer))
    assert isinstance(server.model.encoder, type(load_encoder(t5_dir, stack=ED)))
    final = result.history[-1]
    assert math.isfinite(final["train_loss"]) and math.isfinite(final["test_loss"])
    for adapter in client.adapters:
        moved = {k for k, v in adapter.items() if ".lora_B." in k and float(v.detach().abs().sum()) > 0}
        assert moved == {k for k in adapter if ".lora_B." in k} and any("EncDecAttention" in k for k in moved)
    if strategy == "p3eft":
        assert all(0.0 <= final[k] <= 1.0 for k in ("leak_act", "leak_grad", "leak_theta", "leak_cat", "leak_probe"))


def test_t5_stack_is_validated(t5_dir, tmp_path):
    with pytest.raises(ConfigError, match=r"params\.t5_stack.*allowed: one of 'encoder', 'encoder-decoder'"):
        load_run_config({"strategy": "p3eft", "num_parties": 1, "params": {"t5_stack": "decoder"}})
    with pytest.raises(ConfigError, match=r"params\.t5_stack: unknown key"):  # SAP splits T5's encoder alone
        load_run_config({"strategy": "sap", "num_parties": 1, "params": {"t5_stack": ED}})
    gpt2 = tiny_gpt2_dir(tmp_path / "gpt2")
    cfg = _config("p3eft", gpt2)
    with pytest.raises(ConfigError, match=r"params\.t5_stack.*'encoder-decoder' for a gpt2 model; allowed: 'encoder'") as e:
        Engine(cfg, InProcessTransport(), ToySentiment(), progress=False).strategy.prepare(ToySentiment())
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"params\.t5_stack"):
        load_encoder(gpt2, stack=ED)


def test_checkpointing_and_micro_batches_are_exact_on_the_whole_t5(t5_dir):
    """Gradient checkpointing wraps the decoder's blocks too (cross-attention inputs and all) and
    micro-batches split the rows: the same activations and VJPs as the plain path."""
    spec = lora_spec_for(arch_of(load_encoder(t5_dir, stack=ED)), rank=2, alpha=4.0)
    plain = LoraEncoder(load_encoder(t5_dir, stack=ED), spec, pooling="last")
    lean = LoraEncoder(load_encoder(t5_dir, stack=ED), spec, pooling="last", checkpointing=True, micro_batch=3)
    assert sum(getattr(b.forward, "checkpointed", False) for b in arch_of(lean.encoder).blocks(lean.encoder)) == 6
    adapter = init_adapters(plain.shapes, generator=torch.Generator().manual_seed(1))
    adapter = {k: v if ".lora_A." in k else torch.full_like(v, 0.05) for k, v in adapter.items()}
    ids, mask = _batch(t5_dir)
    lengths = mask.sum(1)
    g = torch.randn(len(ids), 32, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(lean.forward(ids, lengths, adapter), plain.forward(ids, lengths, adapter))
    want, got = plain.backprop(ids, lengths, adapter, g), lean.backprop(ids, lengths, adapter, g)
    for name, ref in want.items():
        torch.testing.assert_close(got[name], ref, rtol=1e-4, atol=1e-6)
