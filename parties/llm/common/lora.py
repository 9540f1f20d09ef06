"""The one LoRA configuration of the split-LLM algorithms and the one way to set it up (peft).

P3EFT injects LoRA into the model server's frozen encoder (and into a weightless copy on the
client, to learn the adapter shapes); SAP injects it into the vendor's top model. Both go through
``inject_lora`` with a ``LoraSpec``; the config keys stay ``params.lora_rank``, ``lora_alpha``,
``lora_dropout`` (SAP only) and ``lora_targets`` (empty: the model family's defaults, ``lora_spec_for``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from parties.llm.common.arch import Arch
from vfl.errors import ConfigError


@dataclass(frozen=True)
class LoraSpec:
    """peft LoRA hyper-parameters. ``dropout`` must stay 0 where calls must be deterministic
    (P3EFT's stateless model-server API)."""

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: tuple[str, ...] = ("query", "value")
    fan_in_fan_out: bool = False  # True for GPT-2's Conv1D layers (weights stored (in, out))

    def peft_config(self) -> Any:
        from peft import LoraConfig

        return LoraConfig(r=self.rank, lora_alpha=self.alpha, lora_dropout=self.dropout,
                          target_modules=list(self.targets), fan_in_fan_out=self.fan_in_fan_out)


def lora_spec_for(arch: Arch, *, rank: int, alpha: float, dropout: float = 0.0, targets: tuple[str, ...] = ()
                  ) -> LoraSpec:
    """The spec for a model family: ``targets`` empty = the family's defaults (encoder: query, value;
    decoder: c_attn, c_proj), and the family's weight layout (``fan_in_fan_out``)."""
    return LoraSpec(rank=rank, alpha=alpha, dropout=dropout, targets=tuple(targets) or arch.lora_targets,
                    fan_in_fan_out=arch.fan_in_fan_out)


def inject_lora(model: nn.Module, spec: LoraSpec, *, where: str = "the model") -> list[nn.Parameter]:
    """Inject peft LoRA layers into ``model`` in place; returns its LoRA parameters.

    Raises ConfigError naming ``params.lora_targets`` when a target module is absent.
    """
    from peft import inject_adapter_in_model

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [t for t in spec.targets if t not in present]
    if missing or not spec.targets:
        examples = sorted(present & {"query", "key", "value", "dense", "c_attn", "c_proj", "c_fc"})
        raise ConfigError("params.lora_targets", f"modules {missing or '[]'} not found in {where} (e.g. {examples})")
    inject_adapter_in_model(spec.peft_config(), model)
    return [p for n, p in model.named_parameters() if "lora_" in n]
