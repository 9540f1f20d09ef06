"""LoRA adapters that travel in messages, and the frozen encoder a model server applies them to.

Client side: ``adapter_shapes`` injects peft LoRA into a weightless (``meta`` device) copy of the
model structure built from the public config, only to read the adapter names and shapes;
``init_adapters`` then creates the tensors itself exactly as peft's default init does (A ~
kaiming-uniform(a=√5), i.e. U(±1/√fan_in); B = 0) from an injected generator. The client never
holds pretrained weights.
Server side: ``LoraEncoder`` holds the frozen pretrained encoder with peft LoRA layers injected
once; every call copies the received adapter tensors into them (stateless per call). Activations
h(x, θ) are the mean of the last hidden states over real tokens (``pooling="mean"``, the
sentence-transformers pooling of MiniLM), the [CLS] state (``pooling="cls"``) or, for a decoder, the
last real token's state (``pooling="last"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from parties.llm.common.backbone import pool
from parties.llm.common.lora import LoraSpec, inject_lora
from vfl.errors import ProtocolError

Adapter = dict[str, torch.Tensor]


def adapter_shapes(model_config: Any, spec: LoraSpec) -> dict[str, tuple[int, ...]]:
    """LoRA parameter names and shapes of the model described by ``model_config`` (no weights loaded)."""
    from transformers import AutoModel

    with torch.device("meta"):
        shell = AutoModel.from_config(model_config)
    inject_lora(shell, spec)
    return {n: tuple(p.shape) for n, p in shell.named_parameters() if "lora_" in n}


def init_adapters(shapes: Mapping[str, tuple[int, ...]], *, generator: torch.Generator) -> Adapter:
    """Fresh adapter tensors with peft's default init: A ~ U(±1/√fan_in), B = 0 (so h(x, θ) = h(x))."""
    out: Adapter = {}
    for name, shape in shapes.items():
        if ".lora_B." in name:
            out[name] = torch.zeros(shape)
        else:
            bound = 1.0 / math.sqrt(shape[1])
            out[name] = torch.empty(shape).uniform_(-bound, bound, generator=generator)
    return out


def attention_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    return (torch.arange(width, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.long)


class LoraEncoder:
    """The model server's frozen encoder with LoRA slots; forward/backprop for given adapter tensors."""

    def __init__(self, encoder: nn.Module, spec: LoraSpec | None, *, pooling: str = "mean", device: str = "cpu"
                 ) -> None:
        self.encoder = encoder.to(device)
        self.encoder.eval()
        for p in self.encoder.parameters():
            p.requires_grad_(False)
        if spec is not None:  # None: a server for frozen features only (no LoRA slots)
            inject_lora(self.encoder, spec)
        self.slots = {n: p for n, p in self.encoder.named_parameters() if "lora_" in n}
        for p in self.slots.values():
            p.requires_grad_(True)
        self.pooling, self.device = pooling, device

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {n: tuple(p.shape) for n, p in self.slots.items()}

    def load(self, adapter: Mapping[str, Any] | None) -> None:
        """Copy the received adapter into the LoRA slots; ``None``/empty = no adapter (B = 0)."""
        with torch.no_grad():
            if not adapter:
                for n, p in self.slots.items():
                    if ".lora_B." in n:
                        p.zero_()
                return
            if set(adapter) != set(self.slots):
                extra, missing = sorted(set(adapter) - set(self.slots)), sorted(set(self.slots) - set(adapter))
                raise ProtocolError(f"adapter tensors do not match this server's LoRA slots "
                                    f"(unexpected {extra[:3]}, missing {missing[:3]})")
            for n, p in self.slots.items():
                t = torch.as_tensor(adapter[n])
                if tuple(t.shape) != tuple(p.shape):
                    raise ProtocolError(f"adapter tensor {n} has shape {tuple(t.shape)}, expected {tuple(p.shape)}")
                p.copy_(t)

    def activations(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """h(x, θ) for the loaded adapter; differentiable w.r.t. the LoRA slots when grad is enabled."""
        ids, lengths = ids.to(self.device), lengths.to(self.device)
        mask = attention_mask(lengths, ids.shape[1])
        hidden = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        return pool(hidden, mask, self.pooling)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, adapter: Mapping[str, Any] | None) -> torch.Tensor:
        self.load(adapter)
        with torch.no_grad():
            return self.activations(ids, lengths)

    def backprop(self, ids: torch.Tensor, lengths: torch.Tensor, adapter: Mapping[str, Any], g: torch.Tensor
                 ) -> dict[str, torch.Tensor]:
        """g_θ = (∂h/∂θ)^T g. Rows where g is zero contribute nothing (examples are independent in the
        encoder), so only the others are run: exact, and m = B pieces cost one example each."""
        self.load(adapter)
        rows = torch.nonzero(g.reshape(len(g), -1).abs().sum(1) > 0).squeeze(1)
        if len(rows) == 0:
            return {n: torch.zeros_like(p) for n, p in self.slots.items()}
        width = int(lengths[rows].max())
        with torch.enable_grad():
            h = self.activations(ids[rows, :width], lengths[rows])
            grads = torch.autograd.grad(h, list(self.slots.values()), grad_outputs=g[rows].to(h.dtype))
        return {n: t.detach() for n, t in zip(self.slots, grads, strict=True)}
