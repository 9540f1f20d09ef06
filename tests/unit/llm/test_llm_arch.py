"""Architecture adapters and model loading: a GPT-2 style decoder splits exactly, gets correctly laid
out LoRA on its Conv1D layers, pools the last real token; model_dir resolves offline or says why not."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from parties.llm.common.arch import DECODER, ENCODER, arch_of
from parties.llm.common.backbone import load_encoder, load_tokenizer, pool, resolve_model_dir
from parties.llm.common.loading import arch_of_config
from parties.llm.common.lora import inject_lora, lora_spec_for
from parties.llm.common.tiny import tiny_gpt2_dir
from parties.llm.p3eft.adapters import LoraEncoder, adapter_shapes
from parties.llm.sap.split import bottom_state, build_bottom, split_encoder
from vfl.core.errors import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
TEXTS = ["a gripping film", "the plot is thin and the jokes fall flat", "dull"]


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    return tiny_gpt2_dir(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="module")
def model(gpt2_dir):
    return load_encoder(gpt2_dir)


@pytest.fixture(scope="module")
def batch(gpt2_dir):
    return load_tokenizer(gpt2_dir)(TEXTS, padding=True, return_tensors="pt")


def test_tokenizer_without_pad_pads_right_with_eos(gpt2_dir, batch):
    tok = load_tokenizer(gpt2_dir)
    assert tok.pad_token == tok.eos_token == "<|endoftext|>" and tok.padding_side == "right"
    lengths = batch["attention_mask"].sum(1)
    assert lengths.tolist() == [len(tok(t)["input_ids"]) for t in TEXTS] and len(set(lengths.tolist())) == 3
    for row, n in zip(batch["input_ids"], lengths, strict=True):  # real tokens first, then eos padding
        assert (row[n:] == tok.pad_token_id).all()


def test_families_are_told_apart(model):
    assert arch_of(model) is DECODER and DECODER.causal and arch_of_config(model.config) is DECODER
    bert = load_encoder(None)
    assert arch_of(bert) is ENCODER and not ENCODER.causal
    assert len(DECODER.blocks(model)) == 2 and DECODER.final_norm(model) is model.ln_f
    assert DECODER.embeddings(model).word_embeddings is model.wte
    with pytest.raises(ConfigError, match=r"params\.model_dir.*GPT-2"):
        arch_of(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("split", [0, 1])
def test_decoder_split_is_exact_and_pools_the_last_real_token(model, batch, split):
    enc = copy.deepcopy(model)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    with torch.no_grad():
        want = pool(enc(input_ids=ids, attention_mask=mask).last_hidden_state, mask, "last")
        bottom, top = split_encoder(enc, split=split, num_classes=2)
        assert top.pooling == "last" and top.norm is enc.ln_f
        got = top.features(bottom(ids, mask), mask)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        n = int(mask[2].sum())  # the short text alone: padding (causal + mask) changes nothing
        alone = top.features(bottom(ids[2:, :n], mask[2:, :n]), mask[2:, :n])
        torch.testing.assert_close(alone[0], got[2], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("split", [0, 1])
def test_shipped_decoder_bottom_rebuilds_exactly(model, batch, split):
    bottom, _ = split_encoder(copy.deepcopy(model), split=split, num_classes=2)
    config_json, state = bottom_state(bottom)
    assert json.loads(config_json)["model_type"] == "gpt2"
    rebuilt = build_bottom(config_json=config_json, split=split, state=state).eval()
    ids, mask = batch["input_ids"], batch["attention_mask"]
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(ids, mask), bottom(ids, mask))
        torch.testing.assert_close(rebuilt.vocab, model.wte.weight)  # what the inversion attack searches


def test_decoder_refuses_cls_pooling(model):
    with pytest.raises(ConfigError, match=r"params\.pooling.*decoder"):
        split_encoder(copy.deepcopy(model), split=1, num_classes=2, pooling="cls")
    assert ENCODER.check_pooling(None) == "mean" and DECODER.check_pooling(None) == "last"


def test_gpt2_lora_targets_conv1d_with_the_right_layout(model, batch):
    """LoRA on GPT-2's Conv1D (weight stored (in, out)): fan_in_fan_out must be set, else the update
    is transposed. Checked against the explicit formula x (W + s (B A)^T) + b."""
    enc = copy.deepcopy(model)
    spec = lora_spec_for(DECODER, rank=2, alpha=4.0)
    assert spec.targets == ("c_attn", "c_proj") and spec.fan_in_fan_out
    params = inject_lora(enc, spec)
    names = [n for n, _ in enc.named_parameters() if "lora_A" in n]
    assert any(".attn.c_attn." in n for n in names) and any(".mlp.c_proj." in n for n in names)
    assert len(params) == 2 * 3 * 2  # A and B, three Conv1D targets per block, two blocks
    layer = enc.h[0].attn.c_attn
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        layer.lora_B["default"].weight.copy_(torch.randn(layer.lora_B["default"].weight.shape, generator=gen))
        x = torch.randn(3, layer.base_layer.weight.shape[0], generator=gen)
        delta = layer.lora_B["default"].weight @ layer.lora_A["default"].weight * (4.0 / 2)
        want = x @ (layer.base_layer.weight + delta.T) + layer.base_layer.bias
        torch.testing.assert_close(layer(x), want, rtol=1e-5, atol=1e-5)


def test_p3eft_client_shapes_match_the_decoder_server(gpt2_dir, model, batch):
    spec = lora_spec_for(DECODER, rank=2, alpha=4.0)
    server = LoraEncoder(copy.deepcopy(model), spec, pooling="last")
    assert adapter_shapes(model.config, spec) == server.shapes  # the client never loads weights
    lengths = batch["attention_mask"].sum(1)
    h = server.forward(batch["input_ids"], lengths, None)
    with torch.no_grad():
        want = pool(model(**batch).last_hidden_state, batch["attention_mask"], "last")
    torch.testing.assert_close(h, want, rtol=1e-5, atol=1e-6)  # B = 0: the adapters start as the identity
    with pytest.raises(ConfigError, match=r"params\.lora_targets.*c_attn"):
        inject_lora(copy.deepcopy(model), lora_spec_for(DECODER, rank=2, alpha=4.0, targets=("query",)))


# ---- model_dir resolution (offline) ---------------------------------------------------------------
def test_model_dir_must_be_a_local_directory(tmp_path):
    with pytest.raises(ConfigError, match=r"params\.model_dir.*local Hugging Face model directory"):
        resolve_model_dir(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=r"params\.model_dir.*config\.json"):
        resolve_model_dir(str(tmp_path))
    with pytest.raises(ConfigError, match=r"params\.model_dir.*not downloaded"):
        resolve_model_dir("some-org/not-in-the-cache")


def test_hub_id_resolves_from_the_local_cache_only(tmp_path, monkeypatch, gpt2_dir):
    """A hub id already in the Hugging Face cache resolves to its snapshot with no network; a download
    needs both params.allow_download and HF_HUB_OFFLINE=0."""
    from huggingface_hub import constants

    snap = tmp_path / "models--org--tiny-gpt2" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (snap / "config.json").write_text((Path(gpt2_dir) / "config.json").read_text())
    (tmp_path / "models--org--tiny-gpt2" / "refs").mkdir()
    (tmp_path / "models--org--tiny-gpt2" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert resolve_model_dir("org/tiny-gpt2") == snap.resolve()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match=r"params\.allow_download.*HF_HUB_OFFLINE=0"):
        resolve_model_dir("org/tiny-gpt2", allow_download=True)
    assert resolve_model_dir(gpt2_dir, allow_download=True) == Path(gpt2_dir)  # a local directory needs no opt-in
