"""SAP split: bottom (shipped as weights + config, rebuilt by the customer) + top == the unsplit model."""

from __future__ import annotations

import copy

import pytest
import torch

from parties.llm.common.backbone import load_encoder, load_tokenizer
from parties.llm.common.lora import LoraSpec, inject_lora
from parties.llm.common.wire import pack, unpack
from parties.llm.sap.split import bottom_state, build_bottom, check_split, split_encoder
from vfl.core.errors import ConfigError

TEXTS = ["a fine, moving film", "the rock is destined to be the 21st century's new conan", "dull"]


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(None)


@pytest.fixture(scope="module")
def batch():
    return load_tokenizer(None)(TEXTS, padding=True, return_tensors="pt")


def _unsplit_logits(full, head, batch, pooling="mean"):
    h = full(**batch).last_hidden_state
    if pooling == "cls":
        return head(h[:, 0])
    m = batch["attention_mask"].unsqueeze(-1).float()
    return head((h * m).sum(1) / m.sum(1))


@pytest.mark.parametrize("split", [0, 1, 3, 5])
def test_bottom_plus_top_equals_unsplit_model(encoder, batch, split):
    enc = copy.deepcopy(encoder)
    bottom, top = split_encoder(enc, split=split, num_classes=3)
    with torch.no_grad():
        want = _unsplit_logits(copy.deepcopy(encoder), top.head, batch)
        # through the wire format: shipped weights, rebuilt bottom, packed real tokens only
        config_json, state = bottom_state(bottom)
        rebuilt = build_bottom(config_json=config_json, split=split, state=state).eval()
        lengths = batch["attention_mask"].sum(1)
        flat = pack(rebuilt(batch["input_ids"], batch["attention_mask"]), lengths)
        assert flat.shape == (int(lengths.sum()), 384)
        padded, mask = unpack(flat, lengths)
        got = top.eval()(padded, mask)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_cls_pooling_and_lora_at_init_are_exact(encoder, batch):
    enc = copy.deepcopy(encoder)
    bottom, top = split_encoder(enc, split=2, num_classes=2, pooling="cls")
    params = inject_lora(top, LoraSpec(rank=4, alpha=8, dropout=0.0, targets=("query", "value")))
    assert params and all(p.requires_grad for p in params)
    assert len(params) == 4 * 2 * 2  # 4 top blocks x (query, value) x (A, B)
    with torch.no_grad():
        want = _unsplit_logits(copy.deepcopy(encoder), top.head, batch, pooling="cls")
        got = top.eval()(bottom(batch["input_ids"], batch["attention_mask"]), batch["attention_mask"])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)  # LoRA's B starts at zero
    assert all(not p.requires_grad for n, p in bottom.named_parameters())  # loaded frozen


def test_forward_embeds_matches_ids_and_shipping_is_strict(encoder, batch):
    bottom, _ = split_encoder(copy.deepcopy(encoder), split=2, num_classes=2)
    bottom.eval()
    with torch.no_grad():
        a = bottom(batch["input_ids"], batch["attention_mask"])
        b = bottom.forward_embeds(bottom.vocab[batch["input_ids"]], batch["attention_mask"])
    torch.testing.assert_close(a, b)
    config_json, state = bottom_state(bottom)
    state.pop(next(iter(state)))
    with pytest.raises(ConfigError, match="do not match"):
        build_bottom(config_json=config_json, split=2, state=state)


def test_split_out_of_range_and_bad_lora_target(encoder):
    with pytest.raises(ConfigError, match="params.split"):
        check_split(encoder, 6)
    _, top = split_encoder(copy.deepcopy(encoder), split=4, num_classes=2)
    with pytest.raises(ConfigError, match="lora_targets"):
        inject_lora(top, LoraSpec(rank=2, alpha=4, dropout=0.0, targets=("q_proj",)))
