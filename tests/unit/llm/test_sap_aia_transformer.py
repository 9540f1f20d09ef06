"""SAP's fifth AIA probe, the paper's attacker: a transformer (a copy of the vendor's top with LoRA
and a fresh head) fine-tuned on the token representations received. Where the attribute lives in
token order, every pooled/length probe reads chance and the transformer reads it; where the
attribute is random it reads chance too; the SAP summary names the probe that won."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

import strategies  # noqa: F401
from parties.llm.common.lora import LoraSpec, inject_lora
from parties.llm.sap.split import split_encoder
from vfl.attacks.attribute import (
    PROBES,
    attacker_inference,
    split_labeled,
    transformer_attribute_inference,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

N, L, MARK = 160, 10, 7


def _tiny_bert_split0() -> tuple[nn.Module, nn.Module]:
    from transformers import BertConfig, BertModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        enc = BertModel(BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=32))
        bottom, top = split_encoder(enc, split=0, num_classes=2)
        top.requires_grad_(False)
        inject_lora(top, LoraSpec(rank=4, alpha=8.0))
    return bottom, top


def _make_model(top: nn.Module):
    def make(num_classes: int) -> nn.Module:  # as the vendor builds it: its top, LoRA + a fresh head trainable
        m = copy.deepcopy(top)
        m.head = nn.Linear(top.head.in_features, num_classes)
        for name, p in m.named_parameters():
            p.requires_grad_("lora_" in name or name.startswith("head."))
        return m
    return make


def _attack(order_coded: bool, seed: int) -> tuple[str, dict[str, float]]:
    """Sequences of random tokens of one length with a marker at position 1 or L-2: the multiset of
    tokens (so every pooled vector and every length) does not depend on where the marker is."""
    rng = np.random.default_rng(seed)
    attr = rng.integers(0, 2, N)
    where = attr if order_coded else rng.integers(0, 2, N)  # control: the marker's place says nothing
    toks = rng.integers(20, 120, (N, L))
    toks[np.arange(N), np.where(where == 1, 1, L - 2)] = MARK
    bottom, top = _tiny_bert_split0()
    with torch.no_grad():
        reps = [r.numpy() for r in bottom(torch.as_tensor(toks), torch.ones(N, L, dtype=torch.long))]
    known, rest = split_labeled(n=N, fraction=0.5, rng=rng)

    def probe(tr: np.ndarray, ty: np.ndarray, te: np.ndarray) -> np.ndarray:
        return transformer_attribute_inference(reps=reps, train=tr, train_y=ty, test=te, make_model=_make_model(top),
                                               epochs=20, lr=1e-2, seed=0)

    _, each, chosen = attacker_inference(pooled=np.stack([r.mean(0) for r in reps]), lengths=np.full(N, L),
                                         known=known, known_y=attr[known], targets=rest, seed=0, finetune=probe)
    return chosen, {p: float((v == attr[rest]).mean()) for p, v in each.items()}


def test_the_transformer_reads_an_order_coded_attribute_the_pooled_probes_cannot():
    chosen, acc = _attack(order_coded=True, seed=0)
    pooled_best = max(acc[p] for p in PROBES if p != "transformer")
    assert pooled_best < 0.65  # control: the four old probes read chance (same token multiset, same length)
    assert acc["transformer"] >= pooled_best and acc["transformer"] > 0.9
    assert chosen == "transformer"  # the cross-validation on the labelled samples found it


def test_the_transformer_reads_chance_on_a_random_attribute():
    _, acc = _attack(order_coded=False, seed=1)
    assert abs(acc["transformer"] - 0.5) < 0.15  # 80 targets: 3 standard errors of a coin


def test_the_probe_is_seeded_and_leaves_the_global_generator_alone():
    bottom, top = _tiny_bert_split0()
    rng = np.random.default_rng(2)
    toks = torch.as_tensor(rng.integers(20, 120, (40, L)))
    with torch.no_grad():
        reps = [r.numpy() for r in bottom(toks, torch.ones(40, L, dtype=torch.long))]
    y = rng.integers(0, 3, 40)
    kw = dict(reps=reps, train=np.arange(30), train_y=y[:30], test=np.arange(30, 40), make_model=_make_model(top),
              epochs=2, lr=1e-2, seed=5)
    torch.manual_seed(9)
    before = torch.rand(1)
    torch.manual_seed(9)
    a = transformer_attribute_inference(**kw)
    assert torch.rand(1) == before  # the caller's generator is where it was
    assert np.array_equal(a, transformer_attribute_inference(**kw)) and set(a) <= set(y[:30])


@pytest.mark.parametrize("key,value", [("aia_finetune_epochs", -1), ("aia_finetune_lr", 0.0)])
def test_the_probe_options_are_validated(key, value):
    from tests.engine.llm.test_sap_nodes import sap_config
    from vfl.core.errors import ConfigError

    with pytest.raises(ConfigError, match=f"params.{key}"):
        sap_config(**{key: value})
