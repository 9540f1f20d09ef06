"""The one LoRA configuration of the split-LLM algorithms and the one way to set it up (peft).

P3EFT injects LoRA into the model server's frozen encoder (and into a weightless copy on the
client, to learn the adapter shapes); SAP injects it into the vendor's top model. Both go through
``inject_lora`` with a ``LoraSpec``; the config keys stay ``params.lora_rank``, ``lora_alpha``,
``lora_dropout`` (SAP only) and ``lora_targets`` (empty: the model family's defaults, ``lora_spec_for``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from parties.llm.common.arch import ALL_LINEAR, Arch
from vfl.core.errors import ConfigError


@dataclass(frozen=True)
class LoraSpec:
    """peft LoRA hyper-parameters. ``dropout`` must stay 0 where calls must be deterministic
    (P3EFT's stateless model-server API)."""

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: tuple[str, ...] = ("query", "value")
    fan_in_fan_out: bool = False  # True for GPT-2's Conv1D layers (weights stored (in, out))
    parameters: tuple[str, ...] = ()  # peft target_parameters: MoE experts stored as 3-D tensors, not Linear

    def peft_config(self) -> Any:
        from peft import LoraConfig

        extra: dict[str, Any] = {}
        if self.parameters:  # only MoE experts need it (peft 0.17 added target_parameters)
            if not peft_has_target_parameters():
                raise ConfigError("params.lora_targets", "all-linear on a mixture of experts needs LoRA on its 3-D "
                                  "expert weights, which this peft lacks (LoraConfig target_parameters, peft >= 0.17): "
                                  "pip install -U peft")
            extra["target_parameters"] = list(self.parameters)
        return LoraConfig(r=self.rank, lora_alpha=self.alpha,  # type: ignore[arg-type]  # peft annotates int; it is the float scale alpha/r
                          lora_dropout=self.dropout, target_modules=list(self.targets),
                          fan_in_fan_out=self.fan_in_fan_out, **extra)


def peft_has_target_parameters() -> bool:
    """Whether the installed peft's LoraConfig takes ``target_parameters`` (LoRA on 3-D MoE expert weights)."""
    import dataclasses

    from peft import LoraConfig

    return any(f.name == "target_parameters" for f in dataclasses.fields(LoraConfig))


def lora_spec_for(arch: Arch, *, rank: int, alpha: float, dropout: float = 0.0, targets: tuple[str, ...] = ()
                  ) -> LoraSpec:
    """The spec for a model family: ``targets`` empty = the family's defaults (``arch.TARGET_GROUPS``:
    the attention query/value projections, fused ``qkv_proj`` for Phi-3, ``query_key_value`` for
    GPT-NeoX, GPT-2's Conv1D ``c_attn``/``c_proj``), ``[all-linear]`` = every linear layer in the
    blocks, and the family's weight layout (``fan_in_fan_out``)."""
    return LoraSpec(rank=rank, alpha=alpha, dropout=dropout, targets=tuple(targets) or arch.lora_targets,
                    fan_in_fan_out=arch.fan_in_fan_out)


def linear_targets(model: nn.Module) -> tuple[str, ...]:
    """``all-linear``: the full names of every linear layer inside the blocks (a path with a block
    index), so embeddings, a pooler and a classification head stay without LoRA (as peft's own option)."""
    from transformers.pytorch_utils import Conv1D

    return tuple(name for name, mod in model.named_modules()
                 if isinstance(mod, (nn.Linear, Conv1D)) and re.search(r"(^|\.)\d+\.", name))


def expert_parameters(model: nn.Module) -> tuple[str, ...]:
    """``all-linear`` on a mixture of experts: the 3-D expert weights inside the blocks (transformers
    stores Mixtral/Qwen-MoE experts as one (experts, out, in) tensor, which no Linear holds); they get
    LoRA through peft's ``target_parameters`` (a rank-r adapter per expert)."""
    return tuple(name for name, p in model.named_parameters() if p.ndim == 3 and re.search(r"(^|\.)\d+\.", name))


def inject_lora(model: nn.Module, spec: LoraSpec, *, where: str = "the model") -> list[nn.Parameter]:
    """Inject peft LoRA layers into ``model`` in place; returns its LoRA parameters.

    Raises ConfigError naming ``params.lora_targets`` when a target module is absent.
    """
    from peft import inject_adapter_in_model

    if spec.targets == (ALL_LINEAR,):
        spec = replace(spec, targets=linear_targets(model), parameters=expert_parameters(model))
    present = {n for name, _ in model.named_modules() for n in (name, name.rsplit(".", 1)[-1])}
    missing = [t for t in spec.targets if t not in present]
    if missing or not spec.targets:
        examples = sorted(present & {"query", "value", "q_proj", "v_proj", "qkv_proj", "c_attn", "c_proj", ALL_LINEAR})
        raise ConfigError("params.lora_targets", f"modules {missing or '[]'} not found in {where} (e.g. {examples})")
    inject_adapter_in_model(spec.peft_config(), model)
    params = [p for n, p in model.named_parameters() if "lora_" in n]
    for p in params:  # float32 whatever the frozen weights' dtype (peft runs the branch in this dtype)
        p.data = p.data.to(torch.float32)
    return params
