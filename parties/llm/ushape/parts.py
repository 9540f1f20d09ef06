"""The U-shaped split of a causal LM: head (client), body (model server), tail (client).

head = the input embeddings + blocks ``[0, split)``; body = blocks ``[split, n - tail)``; tail = the
last ``tail`` blocks + the final norm + the LM head + what the model's ``ForCausalLM.forward`` does to
the logits after its head (``LogitsOut``: Granite divides them by ``logits_scaling``, Gemma 2/3 cap them
with ``final_logit_softcapping``, Cohere multiplies them by ``logit_scale``). The client holds head and
tail, so the token ids, the logits and the labels (the response tokens) never leave it; the server sees
the head's hidden states and the gradient of the loss with respect to its own output. State outside
the blocks (a rotary decoder's ``rotary_emb``) is the arch's ``context`` and goes with every part.
The parts run in eval mode in training too: no dropout (GPT-2 and OPT configs set 0.1; Llama-style
ones 0), so every step is deterministic, a run resumes mid-epoch exactly and the split trains as the
model does in one process with its dropout off.
``tail(body(head(x)))`` is the whole model's forward: every node checks it at start-up on a probe
(``self_check``: logits and loss, or the run is refused in one line), and
``tests/engine/llm/test_ushape_families.py`` trains each family split and whole on the same batches.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from parties.llm.common.arch import Arch, arch_of
from parties.llm.common.backbone import resolve_model_dir, torch_dtype
from vfl.core.errors import ConfigError


def load_causal_lm(model_dir: str | None, *, dtype: str = "fp32") -> nn.Module:
    """A frozen, eval-mode ``AutoModelForCausalLM`` from local files. A base-model checkpoint without an
    LM head gets one initialized from the input embedding table (the tied-weights initialization), so the
    load is deterministic whatever the checkpoint holds."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    path = str(resolve_model_dir(model_dir))
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the missing head is handled below, not reported on every host
    try:
        loaded: Any = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch_dtype(dtype),
                                                           output_loading_info=True)
        lm, info = loaded
    except ValueError as exc:  # an encoder (BERT, T5 ...) has no causal-LM class
        raise ConfigError("params.model_dir", f"{path} is not a causal (decoder) LM: {str(exc).splitlines()[0]}"
                          ) from None
    finally:
        hf_logging.set_verbosity(level)
    head = lm.get_output_embeddings()
    if any(k.endswith("lm_head.weight") for k in info.get("missing_keys", ())) and head is not None:
        with torch.no_grad():
            head.weight.copy_(lm.get_input_embeddings().weight)
    lm.eval()
    for p in lm.parameters():
        p.requires_grad_(False)
    return lm  # type: ignore[no-any-return]


def check_cut(*, num_blocks: int, split: int, tail: int) -> None:
    """The body must keep at least one block: ``split + tail < num_blocks`` (ConfigError otherwise)."""
    if split + tail >= num_blocks:
        raise ConfigError("params.split", f"split {split} + tail_blocks {tail} leaves no block for the model "
                          f"server; this model has {num_blocks} blocks, allowed: split + tail_blocks <= {num_blocks - 1}")


class _Part(nn.Module):
    def __init__(self, *, config: Any, arch: Arch, layers: list[nn.Module], context: nn.Module | None) -> None:
        super().__init__()
        self.config, self.arch, self.context = config, arch, context
        self.layers = nn.ModuleList(layers)

    @property
    def dtype(self) -> torch.dtype:
        first = next(iter(self.layers.parameters()), None)
        return first.dtype if first is not None else torch.float32

    def run(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.arch.run_blocks(self.layers, self.config, h.to(self.dtype), mask, self.context)


class Head(_Part):
    """Client: token ids -> hidden states after the first ``split`` blocks (float32)."""

    def __init__(self, *, embeddings: nn.Module, **kw: Any) -> None:
        super().__init__(**kw)
        self.embeddings = embeddings

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.embeddings(input_ids=ids, attention_mask=mask)
        return self.run(h, mask).to(torch.float32)


class Body(_Part):
    """Model server: hidden states -> hidden states through the middle blocks (float32 in and out)."""

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.run(h, mask).to(torch.float32)


class LogitsOut(nn.Module):
    """What a ``ForCausalLM.forward`` does to the LM head's output, read from the model's config: Granite
    divides by ``logits_scaling``, Gemma 2/3 apply ``final_logit_softcapping`` (c·tanh(z/c)), Cohere
    multiplies by ``logit_scale``; the identity for the others (Llama, Mistral, Qwen, Phi-3, GPT-2, OPT,
    GPT-NeoX ...). A family that does something else is caught by ``self_check``."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.divide = float(getattr(config, "logits_scaling", None) or 1.0)
        self.multiply = float(getattr(config, "logit_scale", None) or 1.0)
        cap = getattr(config, "final_logit_softcapping", None)
        self.cap = float(cap) if cap else None

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        if self.divide != 1.0:
            logits = logits / self.divide
        if self.multiply != 1.0:
            logits = logits * self.multiply
        if self.cap is not None:
            logits = torch.tanh(logits / self.cap) * self.cap
        return logits


class Tail(_Part):
    """Client: hidden states -> next-token logits through the last blocks, the final norm, the LM head and
    the model's own logit transform (``LogitsOut``)."""

    def __init__(self, *, norm: nn.Module | None, lm_head: nn.Module, **kw: Any) -> None:
        super().__init__(**kw)
        self.norm, self.lm_head = norm, lm_head
        self.logits_out = LogitsOut(self.config)

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.run(h, mask)
        if self.norm is not None:
            h = self.norm(h)
        head: Any = self.lm_head
        logits: torch.Tensor = head(h.to(head.weight.dtype))
        return self.logits_out(logits).to(torch.float32)


def split_causal_lm(lm: nn.Module, *, split: int, tail: int) -> tuple[Head, Body, Tail]:
    """Head, body and tail sharing ``lm``'s modules (no copy)."""
    base: Any = lm.base_model
    arch = arch_of(base)
    if not arch.causal:
        raise ConfigError("params.model_dir", f"{type(lm).__name__} is not a decoder; the U-shaped split needs a "
                          "causal LM (Llama, Mistral, Qwen, GPT-2 ...)")
    blocks = arch.blocks(base)
    check_cut(num_blocks=len(blocks), split=split, tail=tail)
    kw: dict[str, Any] = dict(config=base.config, arch=arch, context=arch.context(base))
    head = Head(embeddings=arch.embeddings(base), layers=blocks[:split], **kw)
    body = Body(layers=blocks[split:len(blocks) - tail], **kw)
    tl = Tail(norm=arch.final_norm(base), lm_head=lm.get_output_embeddings(),  # type: ignore[operator]
              layers=blocks[len(blocks) - tail:], **kw)
    return head, body, tl


def self_check(lm: nn.Module, parts: tuple[Head, Body, Tail], *, model_dir: str, split: int, tail: int) -> float:
    """The start-up check (``parties/llm/common/selfcheck.py``): a probe through head, body and tail equals
    the model's own ``forward`` in its logits (real positions) and in its loss on the probe's tokens
    (``labels=ids``, the padding ignored); returns the larger relative deviation, or raises a one-line
    ConfigError naming ``params.model_dir``. Run with the adapters in place (B = 0: exact zeros)."""
    from transformers.utils import logging as hf_logging

    from parties.llm.common.selfcheck import check_same, probe_batch, probe_mask
    from parties.llm.common.wire import pack
    from parties.llm.ushape.instruct import IGNORE, response_nll

    head, body, tl = parts
    device = next(lm.parameters()).device
    ids, lengths = probe_batch(lm.config)
    mask = probe_mask(ids, lengths).to(device)
    ids, lengths = ids.to(device), lengths.to(device)
    labels = ids.masked_fill(mask == 0, IGNORE)
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # GPT-2's config names no loss type: transformers says it picks the default
    try:
        with torch.no_grad():
            own = lm(input_ids=ids, attention_mask=mask, labels=labels)
    finally:
        hf_logging.set_verbosity(level)

    def logits() -> torch.Tensor:
        with torch.no_grad():
            return tl(body(head(ids, mask), mask), mask)

    def loss() -> torch.Tensor:
        nll, count = response_nll(logits(), labels)
        return (nll / count).reshape(1)

    what = f"the U-shaped split (head {split} block(s), tail {tail} block(s))"
    dtype = next(iter(body.layers.parameters())).dtype
    return max(check_same(split=lambda: pack(logits(), lengths), want=pack(own.logits.float(), lengths), dtype=dtype,
                          model_dir=model_dir, what=f"{what}: its logits"),
               check_same(split=loss, want=own.loss.float().reshape(1), dtype=dtype, model_dir=model_dir,
                          what=f"{what}: its loss"))


def real_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(B, width) 1 for the real tokens of right-padded rows."""
    return (torch.arange(width, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.long)
