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
import warnings
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from parties.llm.common.backbone import pool
from parties.llm.common.checkpointing import checkpoint_blocks
from parties.llm.common.lora import LoraSpec, inject_lora
from parties.llm.common.quantization import quantized_linears
from parties.llm.common.selfcheck import check_same, model_output, probe_batch
from vfl.core.errors import ProtocolError

Adapter = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Kept:
    """A training forward's graph kept for the step's backprop (``LoraEncoder.forward(keep=...)``)."""

    key: Hashable
    ids: torch.Tensor
    lengths: torch.Tensor
    types: torch.Tensor | None
    h: torch.Tensor
    versions: tuple[int, ...]

    def serves(self, key: Hashable, ids: torch.Tensor, lengths: torch.Tensor, types: torch.Tensor | None,
               adapter: Mapping[str, Any], server: LoraEncoder) -> bool:
        """Is this graph the backprop's: the same key and inputs, and the slots still hold ``adapter``,
        untouched since (their version counters), so its gradient is the one a fresh forward gives?"""
        if key != self.key or not torch.equal(ids, self.ids) or not torch.equal(lengths, self.lengths):
            return False
        if (types is None) != (self.types is None) or (types is not None and self.types is not None
                                                          and not torch.equal(types, self.types)):
            return False
        if server._versions() != self.versions or set(adapter) != set(server.slots):
            return False
        return all(torch.equal(torch.as_tensor(adapter[n]).to(p.device, p.dtype).reshape(p.shape), p.detach())
                   for n, p in server.slots.items())


def adapter_shapes(model_config: Any, spec: LoraSpec, *, stack: str = "encoder") -> dict[str, tuple[int, ...]]:
    """LoRA parameter names and shapes of the model described by ``model_config`` (no weights loaded);
    ``stack`` (``params.t5_stack``) as the server loads it (a whole T5 has decoder adapters too)."""
    from parties.llm.common.loading import from_config

    with torch.device("meta"):
        shell = from_config(model_config, stack=stack)
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
    """The model server's frozen encoder with LoRA slots; forward/backprop for given adapter tensors.

    The frozen weights may be bf16/fp16 (``params.dtype``); the LoRA slots are always float32 (peft
    runs the adapter branch in its weights' dtype) and so are the activations returned. ``backprop``
    runs in float32 whatever the weights' dtype: the frozen weights are upcast for the call (exact)
    and put back after, so the server's map ĝ -> (∂h/∂θ)^T ĝ is linear to float32 precision. In
    bf16 it is not: a piece 30× larger than g_h is rounded to 8 bits at every op of the backward, and
    P3EFT's recombination Σ α_j (∂h/∂θ)^T ĝ^j then cancels those pieces against each other, leaving
    the rounding of the large pieces as the error of the small result (measured: tests/unit/
    test_llm_dtype.py). Cost: float32 weights during a backprop call (peak memory of an fp32 model)."""

    def __init__(self, encoder: nn.Module, spec: LoraSpec | None, *, pooling: str = "mean", device: str = "cpu",
                 vjp_fp32: bool = True, micro_batch: int = 0, checkpointing: bool = False,
                 batched_vjp: bool = True) -> None:
        quantized = getattr(encoder, "hf_quantizer", None) is not None  # params.quantization: placed at load
        self.encoder = encoder if quantized else encoder.to(device)
        if checkpointing:  # params.gradient_checkpointing: blocks re-run in the backward (exact)
            checkpoint_blocks(self.encoder)
        self.encoder.eval()
        for p in self.encoder.parameters():
            p.requires_grad_(False)
        self.dtype = next(self.encoder.parameters()).dtype
        if spec is not None:  # None: a server for frozen features only (no LoRA slots)
            inject_lora(self.encoder, spec)
        self.slots = {n: p for n, p in self.encoder.named_parameters() if "lora_" in n}
        self.frozen = [p for n, p in self.encoder.named_parameters() if "lora_" not in n]
        self.quantized = quantized_linears(self.encoder)  # NF4 layers: their matmul dtype goes fp32 in backprop
        for p in self.slots.values():
            p.data = p.data.to(torch.float32)
            p.requires_grad_(True)
        self.pooling, self.device = pooling, device
        self.vjp_fp32 = vjp_fp32  # False: backprop in the weights' dtype (the inexact old behaviour; tests)
        self.micro_batch = micro_batch  # rows per forward/backward (0: the whole batch); exact either way
        self.batched_vjp = batched_vjp  # k pieces' VJPs in one vmapped backward (False: one backward each)
        self.passes = 0  # forward passes run (the cost the shared forward of backprop_many saves)
        self._kept: Kept | None = None  # the last training forward's graph, for the backprop that follows it

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
                p.copy_(t.to(p.device, p.dtype))

    @contextmanager
    def _float32(self) -> Iterator[None]:
        """The frozen weights in float32 for the duration (bf16/fp16 -> fp32 -> back is exact); NF4 weights
        stay 4-bit, their layers dequantize into float32 matmuls (``compute_dtype``) for the duration."""
        if (self.dtype == torch.float32 and not self.quantized) or not self.vjp_fp32:
            yield
            return
        cast = [(p, p.dtype) for p in self.frozen if p.is_floating_point() and p.dtype != torch.float32]
        compute = [(m, m.compute_dtype) for m in self.quantized]
        for p, _ in cast:
            p.data = p.data.to(torch.float32)
        for m, _ in compute:
            m.compute_dtype = torch.float32
        try:
            yield
        finally:
            for p, dtype in cast:
                p.data = p.data.to(dtype)
            for m, dtype in compute:
                m.compute_dtype = dtype

    def activations(self, ids: torch.Tensor, lengths: torch.Tensor, types: torch.Tensor | None = None
                    ) -> torch.Tensor:
        """h(x, θ) for the loaded adapter; differentiable w.r.t. the LoRA slots when grad is enabled.
        ``types``: token types of a sentence pair (models with segment embeddings only)."""
        ids, lengths = ids.to(self.device), lengths.to(self.device)
        mask = attention_mask(lengths, ids.shape[1])
        extra = {} if types is None else {"token_type_ids": types.to(self.device)}
        hidden = self.encoder(input_ids=ids, attention_mask=mask, **extra).last_hidden_state
        return pool(hidden, mask, self.pooling).to(torch.float32)

    def self_check(self, *, model_dir: str, what: str) -> float:
        """The start-up check (``parties/llm/common/selfcheck.py``): a probe through this server's path
        (``forward``: micro-batches cut to their width, the mask from the lengths, checkpointed blocks,
        the LoRA slots, pooling) equals the model's own forward pooled the same way. Before training
        every B is zero, so the slots add exact zeros and the encoder's forward is the model's own.
        Returns the relative deviation, or raises a one-line ConfigError naming ``params.model_dir``."""
        ids, lengths = probe_batch(self.encoder.config)
        want = model_output(self.encoder, ids, lengths, self.pooling)
        passes = self.passes
        try:
            return check_same(split=lambda: self.forward(ids, lengths, None), want=want, dtype=self.dtype,
                              model_dir=model_dir, what=what)
        finally:
            self.passes = passes  # not a pass of the run

    def _chunks(self, rows: torch.Tensor) -> list[torch.Tensor]:
        """``rows`` in micro-batches of ``micro_batch`` (0: one chunk)."""
        return list(rows.split(self.micro_batch)) if self.micro_batch else [rows]

    def kept_key(self) -> Hashable | None:
        """The key of the training forward whose graph is kept (None: none is)."""
        return None if self._kept is None else self._kept.key

    def keeps_graphs(self, rows: int) -> bool:
        """Whether a training forward of ``rows`` rows keeps its graph for the step's backprop: only where
        that backprop would run the same computation (float32 weights, not quantized: a bf16/fp16/NF4
        server backprops in float32) in one pass (``micro_batch`` off or at least the batch: a kept graph
        of the whole batch would defeat the bound micro-batches set on activation memory)."""
        return (bool(self.slots) and self.dtype == torch.float32 and not self.quantized
                and (not self.micro_batch or self.micro_batch >= rows))

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, adapter: Mapping[str, Any] | None,
                types: torch.Tensor | None = None, keep: Hashable | None = None) -> torch.Tensor:
        """h(x, θ) for ``adapter``. ``keep``: a training forward's key (epoch, step, adapter set): where
        ``keeps_graphs``, its graph is kept for ``backprop_many`` with the same key (one pending step: a
        later forward or a load of other adapters drops it), so the step runs one forward, as a
        single-process trainer does, not two."""
        self.load(adapter)
        self._kept = None
        if keep is not None and self.keeps_graphs(len(ids)):
            width = max(1, int(lengths.max()))
            with torch.enable_grad():
                h = self.activations(ids[:, :width], lengths, None if types is None else types[:, :width])
            self.passes += 1
            self._kept = Kept(keep, ids, lengths, types, h, self._versions())
            return h.detach()
        out = []
        with torch.no_grad():
            for rows in self._chunks(torch.arange(len(ids))):
                width = max(1, int(lengths[rows].max()))
                tt = None if types is None else types[rows, :width]
                out.append(self.activations(ids[rows, :width], lengths[rows], tt))
                self.passes += 1
        return torch.cat(out)

    def backprop(self, ids: torch.Tensor, lengths: torch.Tensor, adapter: Mapping[str, Any], g: torch.Tensor,
                 types: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """g_θ = (∂h/∂θ)^T g for one cotangent ``g`` (B, d)."""
        return self.backprop_many(ids, lengths, adapter, g.unsqueeze(0), types=types)[0]

    def backprop_many(self, ids: torch.Tensor, lengths: torch.Tensor, adapter: Mapping[str, Any],
                      pieces: torch.Tensor, types: torch.Tensor | None = None, keep: Hashable | None = None
                      ) -> list[dict[str, torch.Tensor]]:
        """(∂h/∂θ)^T ĝ_j for each piece of ``pieces`` (k, B, d). With ``keep``, the graph the training forward
        of that key kept is used when it is of these inputs and these adapters (``Kept.serves``) and every
        piece touches every row: no second forward. Otherwise rows where a piece is zero contribute
        nothing (examples are independent in the encoder), so only the others are run: exact. Pieces
        that touch the same rows (m >= 2) share one forward and one batched backward per micro-batch
        (``batched_vjp``); pieces on disjoint rows (m = B) run their own rows only (one example each)."""
        used = pieces.reshape(len(pieces), len(ids), -1).abs().sum(-1) > 0  # (k, B)
        kept, self._kept = self._kept, None
        if kept is not None and keep is not None and bool(used.all()) and kept.serves(keep, ids, lengths, types,
                                                                                       adapter, self):
            return self._vjp_kept(kept.h, pieces)
        self.load(adapter)
        out = [{n: torch.zeros(p.shape, device=p.device) for n, p in self.slots.items()} for _ in pieces]
        union = torch.nonzero(used.any(0)).squeeze(1)
        if bool((used[:, union]).all()):  # every piece touches every row any piece touches
            self._vjp(ids, lengths, union, pieces, out, types)
        else:
            for j in range(len(pieces)):
                self._vjp(ids, lengths, torch.nonzero(used[j]).squeeze(1), pieces[j : j + 1], out[j : j + 1], types)
        return [{n: t.detach().cpu() for n, t in grads.items()} for grads in out]

    def _versions(self) -> tuple[int, ...]:
        """The LoRA slots' version counters: any write into them (``load``) changes one."""
        return tuple(p._version for p in self.slots.values())

    def _vjp_kept(self, h: torch.Tensor, pieces: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        """(∂h/∂θ)^T ĝ_j from a kept graph (freed after): one backward, batched over the k pieces."""
        slots = list(self.slots.values())
        cotangents = pieces.to(device=h.device, dtype=h.dtype)
        if len(pieces) == 1:
            grads: Any = [[g] for g in torch.autograd.grad(h, slots, grad_outputs=cotangents[0])]
        else:
            grads = torch.autograd.grad(h, slots, grad_outputs=cotangents, is_grads_batched=True)
        return [{n: g[j].detach().cpu() for n, g in zip(self.slots, grads, strict=True)} for j in range(len(pieces))]

    def _vjp(self, ids: torch.Tensor, lengths: torch.Tensor, rows: torch.Tensor, pieces: torch.Tensor,
             out: list[dict[str, torch.Tensor]], types: torch.Tensor | None = None) -> None:
        """Accumulate (∂h/∂θ)^T piece into ``out`` over ``rows``: per micro-batch, one forward (float32)
        and, with ``batched_vjp``, one backward for all pieces (``is_grads_batched``: the k VJPs
        vmapped over one graph), else one backward per piece."""
        slots = list(self.slots.values())
        for chunk in self._chunks(rows) if len(rows) else []:
            width = int(lengths[chunk].max())
            with torch.enable_grad(), self._float32():
                h = self.activations(ids[chunk, :width], lengths[chunk],
                                     None if types is None else types[chunk, :width])
                self.passes += 1
                cotangents = pieces[:, chunk].to(device=h.device, dtype=h.dtype)  # the server's device, not the wire's
                if self.batched_vjp and len(pieces) > 1:  # batched VJPs: one backward for the k pieces
                    try:
                        batched = torch.autograd.grad(h, slots, grad_outputs=cotangents, is_grads_batched=True)
                    except RuntimeError as e:  # an op without a vmap rule here: one backward per piece from now on
                        warnings.warn(f"batched VJPs failed on {self.device} ({str(e)[:160]}); "
                                      "one backward per piece from now on", RuntimeWarning, stacklevel=2)
                        self.batched_vjp = False
                        h = self.activations(ids[chunk, :width], lengths[chunk],  # that backward freed the graph
                                             None if types is None else types[chunk, :width])
                        self.passes += 1
                    else:
                        for name, t in zip(self.slots, batched, strict=True):
                            for j in range(len(pieces)):
                                out[j][name] += t[j]
                        continue
                for j, cotangent in enumerate(cotangents):
                    grads = torch.autograd.grad(h, slots, grad_outputs=cotangent, retain_graph=j < len(pieces) - 1)
                    for name, t in zip(self.slots, grads, strict=True):
                        out[j][name] += t
