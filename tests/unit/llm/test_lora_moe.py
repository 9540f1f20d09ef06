"""``lora_targets: [all-linear]`` reaches the experts of a mixture of experts (3-D tensors, peft ``target_parameters``)."""

from __future__ import annotations

import pytest
import torch

from parties.llm.common.arch import ALL_LINEAR
from parties.llm.common.lora import (
    LoraSpec,
    expert_parameters,
    inject_lora,
    peft_has_target_parameters,
)
from vfl.core.errors import ConfigError


def _tiny_mixtral():
    from transformers import MixtralConfig, MixtralModel

    torch.manual_seed(0)
    cfg = MixtralConfig(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2)
    return MixtralModel(cfg).eval()


@pytest.mark.skipif(not peft_has_target_parameters(), reason="this peft has no target_parameters (peft < 0.17)")
def test_all_linear_puts_lora_on_the_experts_and_they_train():
    model = _tiny_mixtral()
    assert expert_parameters(model) == ("layers.0.mlp.experts.gate_up_proj", "layers.0.mlp.experts.down_proj",
                                        "layers.1.mlp.experts.gate_up_proj", "layers.1.mlp.experts.down_proj")
    model.requires_grad_(False)
    x = torch.randint(0, 50, (2, 6))
    before = model(input_ids=x).last_hidden_state.detach()
    params = inject_lora(model, LoraSpec(rank=2, alpha=4.0, targets=(ALL_LINEAR,)))
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any("experts" in n and "lora_" in n for n in names)  # the experts carry adapters
    assert torch.allclose(model(input_ids=x).last_hidden_state, before, atol=1e-6)  # B = 0: unchanged at start
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "experts" in n and "lora_B" in n:
                p.normal_()
    out = model(input_ids=x).last_hidden_state
    assert not torch.allclose(out, before, atol=1e-4)  # the expert adapters act in the forward pass
    out.sum().backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "experts" in n and "lora_A" in n)
    assert len(params) == len(names)


def test_a_dense_model_gets_no_target_parameters():
    from transformers import LlamaConfig, LlamaModel

    model = LlamaModel(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1))
    assert expert_parameters(model) == ()
    assert not getattr(LoraSpec(targets=("q_proj",)).peft_config(), "target_parameters", None)


def test_an_old_peft_refuses_moe_experts_in_one_line(monkeypatch):
    """peft < 0.17 (the lower bound's 0.7) has no target_parameters: refused naming the key, not a TypeError."""
    import parties.llm.common.lora as lora

    monkeypatch.setattr(lora, "peft_has_target_parameters", lambda: False)
    with pytest.raises(ConfigError, match=r"params\.lora_targets.*peft >= 0\.17"):
        inject_lora(_tiny_mixtral(), LoraSpec(rank=2, alpha=4.0, targets=(ALL_LINEAR,)))
