"""Every supported model family, built tiny from its config: SAP's split (shipped bottom + top) is the
unsplit model, sliding-window masks are honoured, LoRA lands on the family's default targets (or
all linear layers), and a P3EFT/split-LoRA step through the model server trains."""

from __future__ import annotations

import copy
import re

import pytest
import torch
import torch.nn.functional as F

from parties.llm.common.arch import ALL_LINEAR, arch_of
from parties.llm.common.backbone import load_encoder, load_tokenizer, pool
from parties.llm.common.lora import inject_lora, lora_spec_for
from parties.llm.common.tiny import ENCODERS, FAMILIES
from parties.llm.common.wire import pack, unpack
from parties.llm.p3eft.adapters import LoraEncoder, adapter_shapes
from parties.llm.sap.split import bottom_state, build_bottom, split_encoder
from tests.support.p3eft_step import check_private_backprop_step

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
TEXTS = ["a gripping film", "the plot is thin and the jokes fall flat and the", "dull",
         "one of the best movies of the year"]
DEFAULT_TARGETS = {"llama": ("q_proj", "v_proj"), "mistral": ("q_proj", "v_proj"), "qwen2": ("q_proj", "v_proj"),
                   "qwen3": ("q_proj", "v_proj"), "gemma2": ("q_proj", "v_proj"), "phi3": ("qkv_proj",),
                   "gpt_neox": ("query_key_value",), "opt": ("q_proj", "v_proj"), "distilbert": ("q_lin", "v_lin"),
                   "electra": ("query", "value"), "mpnet": ("q", "v"), "deberta_v2": ("query_proj", "value_proj"), "t5": ("q", "v"),
                   "modernbert": ("Wqkv",), "gemma3": ("q_proj", "v_proj"), "granite": ("q_proj", "v_proj"),
                   "eurobert": ("q_proj", "v_proj"), "gpt2": ("c_attn", "c_proj"), "bert": ("query", "value"),
                   "roberta": ("query", "value")}
SLIDING = ("mistral", "qwen2", "gemma2", "gemma3", "modernbert")  # configs with a window (4) shorter than the longer texts


@pytest.fixture(scope="module")
def dirs(tiny_lm):
    return {f: tiny_lm(f) for f in FAMILIES}


def _batch(path):
    b = load_tokenizer(path)(TEXTS, padding=True, return_tensors="pt")
    return b["input_ids"], b["attention_mask"]


def test_every_family_has_a_case():
    assert set(DEFAULT_TARGETS) == set(FAMILIES)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sap_split_through_the_wire_equals_the_unsplit_model(dirs, family):
    model = load_encoder(dirs[family])
    arch = arch_of(model)
    assert arch.causal is (family not in ENCODERS) and arch.lora_targets == DEFAULT_TARGETS[family]
    ids, mask = _batch(dirs[family])
    lengths = mask.sum(1)
    with torch.no_grad():
        want = pool(model(input_ids=ids, attention_mask=mask).last_hidden_state, mask, arch.default_pooling)
        for split in range(len(arch.blocks(model))):
            bottom, top = split_encoder(copy.deepcopy(model), split=split, num_classes=2)
            config_json, state = bottom_state(bottom)
            rebuilt = build_bottom(config_json=config_json, split=split, state=state).eval()
            padded, m = unpack(pack(rebuilt(ids, mask), lengths), lengths)
            got = top.eval().features(padded, m)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=f"{family} split {split}")


@pytest.mark.parametrize("family", SLIDING)
def test_sliding_window_is_in_the_split(dirs, family):
    """Control: the same weights without a window give another output at these lengths, so the split's
    equality above holds only because it builds the sliding-window masks."""
    model = load_encoder(dirs[family])
    ids, mask = _batch(dirs[family])
    from transformers import AutoModel

    wide = copy.deepcopy(model.config)
    wide.sliding_window = 64  # wider than every text: full attention
    unwindowed = AutoModel.from_config(wide).eval()
    unwindowed.load_state_dict(model.state_dict())
    with torch.no_grad():
        how = arch_of(model).default_pooling
        a = pool(model(input_ids=ids, attention_mask=mask).last_hidden_state, mask, how)
        b = pool(unwindowed(input_ids=ids, attention_mask=mask).last_hidden_state, mask, how)
        bottom, top = split_encoder(copy.deepcopy(model), split=1, num_classes=2)
        split_out = top.eval().features(bottom(ids, mask), mask)
    assert (a - b).abs().max() > 1e-3  # the long texts see beyond the window
    torch.testing.assert_close(split_out, a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("targets", [(), (ALL_LINEAR,)])
def test_p3eft_step_through_the_model_server_trains(dirs, family, targets):
    """The client learns the adapter shapes from the config alone; the server's private backprop
    (m = 2 pieces) recombines to the autograd gradient; one SGD step on the adapter lowers the loss."""
    from transformers import AutoConfig

    model = load_encoder(dirs[family])
    spec = lora_spec_for(arch_of(model), rank=2, alpha=4.0, targets=targets)
    server = LoraEncoder(model, spec, pooling=arch_of(model).default_pooling)
    shapes = adapter_shapes(AutoConfig.from_pretrained(dirs[family]), spec)
    assert shapes == server.shapes
    layers = {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in shapes}
    if targets:  # all-linear: more than the default projections (MLP too), still only inside the blocks
        assert set(DEFAULT_TARGETS[family]) < layers and all(re.search(r"(^|\.)\d+\.", n) for n in shapes)
    else:
        assert layers == set(DEFAULT_TARGETS[family])
    ids, mask = _batch(dirs[family])
    check_private_backprop_step(server, ids, mask, width=arch_of(model).output_size(model.config),
                                tag="test-families")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sap_top_lora_trains_a_step(dirs, family):
    model = load_encoder(dirs[family])
    with torch.random.fork_rng():
        torch.manual_seed(0)
        bottom, top = split_encoder(model, split=1, num_classes=2)
    top.requires_grad_(False)
    params = inject_lora(top, lora_spec_for(arch_of(model), rank=2, alpha=4.0), where="the top model")
    assert params and all(p.dtype == torch.float32 for p in params)
    top.head.requires_grad_(True)
    ids, mask = _batch(dirs[family])
    y = torch.tensor([0, 1, 0, 1])
    opt = torch.optim.Adam([*params, *top.head.parameters()], lr=1e-2)
    with torch.no_grad():
        h = bottom(ids, mask)
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(top(h, mask), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in params)
    assert losses[-1] < losses[0]
