"""The split-LLM strategies' start-up self-check: the split path equals the model's own forward.

SAP runs the model's blocks itself, through an adapter picked by the model's structure (``arch.py``);
the P3EFT family's model servers run the model's own forward behind LoRA slots, micro-batches and
gradient checkpointing. An adapter that misses what a family does (a multiplier, a rotary table per
layer type, a bidirectional mask) would train and report without an error, on another model. So
the vendor / every model server, once it has loaded the model, runs a probe input through the path
the parties take and through the model's own ``forward`` (pooled as the strategy pools), and refuses
the run in one ``params.model_dir`` line when they differ beyond the dtype's rounding: a family
transformers adds later either runs right or does not run.

The probe: two rows of token ids spread over the vocabulary (no special token), the second shorter
(right padding, as the tokenizer pads), ``PROBE_LENGTH`` tokens or the model's position limit. It
cannot see what needs a longer text (a sliding window of 4,096 tokens; the tests cover windows
shorter than the probe).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from parties.llm.common.backbone import pool
from vfl.core.errors import ConfigError

PROBE_LENGTH = 12
# max |split − model| / max |model| allowed, by the weights' dtype. float32: the same operations in
# another grouping (measured ≤ 1e-6 on every tiny family); bf16/fp16: SAP's customer runs the shipped
# bottom in float32 while the model's own forward rounds every block to 8 (bf16) / 11 (fp16) bits.
TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}
_SPECIAL = ("pad_token_id", "bos_token_id", "eos_token_id", "unk_token_id", "cls_token_id", "sep_token_id",
            "mask_token_id", "decoder_start_token_id")


def probe_batch(config: Any, *, length: int = PROBE_LENGTH) -> tuple[torch.Tensor, torch.Tensor]:
    """(2, L) token ids and their lengths (L, L − L//3): deterministic, spread over the vocabulary,
    no special token among the real ones; the padding carries the pad (else end-of-text) id."""
    from parties.llm.common.tokens import max_positions

    limit = max_positions(config)
    width = max(4, min(length, limit if limit is not None else length))
    special = {int(v) for k in _SPECIAL if isinstance(v := getattr(config, k, None), int)}
    vocab = [i for i in range(int(config.vocab_size)) if i not in special]
    ids = torch.tensor([[vocab[(37 * (width * r + i) + 11) % len(vocab)] for i in range(width)] for r in range(2)])
    lengths = torch.tensor([width, width - width // 3])
    pad = getattr(config, "pad_token_id", None)
    pad = pad if isinstance(pad, int) else getattr(config, "eos_token_id", None)
    ids[1, int(lengths[1]):] = pad if isinstance(pad, int) and 0 <= pad < int(config.vocab_size) else vocab[0]
    return ids, lengths


def probe_mask(ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    return (torch.arange(ids.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.long)


def model_output(model: nn.Module, ids: torch.Tensor, lengths: torch.Tensor, pooling: str) -> torch.Tensor:
    """The model's own forward on the probe, pooled as the strategy pools (float32, on the CPU)."""
    device = next(model.parameters()).device
    mask = probe_mask(ids, lengths).to(device)
    with torch.no_grad():
        hidden = model(input_ids=ids.to(device), attention_mask=mask).last_hidden_state
    return pool(hidden, mask, pooling).to(torch.float32).cpu()


def deviation(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got − want| / max |want| (NaN if they do not even have the same shape or are not finite)."""
    got, want = got.detach().to("cpu", torch.float32), want.detach().to("cpu", torch.float32)
    if got.shape != want.shape:
        return float("nan")
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-12))


def check_same(*, split: Callable[[], torch.Tensor], want: torch.Tensor, dtype: torch.dtype, model_dir: str,
               what: str) -> float:
    """Run ``split`` (the probe through the split path) and return its deviation from ``want`` (the
    model's own forward), or raise a one-line ConfigError naming ``params.model_dir`` when it exceeds the
    dtype's ``TOLERANCE`` (or is NaN) or the split path fails on the probe."""
    refused = f"{model_dir}: {what}"
    why = "this model family is not run right by the split, so the run is refused"
    try:
        got = split()
    except ConfigError:
        raise
    except Exception as exc:  # any failure of the split path on a valid input: the family is not handled
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ConfigError("params.model_dir", f"{refused} fails on a probe input ({type(exc).__name__}: {first}); "
                          f"{why}") from exc
    dev, tol = deviation(got, want), TOLERANCE.get(dtype, TOLERANCE[torch.bfloat16])
    if not dev <= tol:
        name = str(dtype).removeprefix("torch.")
        raise ConfigError("params.model_dir", f"{refused} differs from the model's own forward on a probe input by "
                          f"{dev:.3g} (max |Δ| / max |output|; allowed {tol:g} in {name}); {why}")
    return dev
