"""Instruction data as causal-LM training rows: prompt tokens masked out of the loss.

A row is ``template(prompt) + response + eos``, right-padded; ``labels`` equal the ids on the response
and eos tokens and ``IGNORE`` (-100, PyTorch's ``ignore_index``) on the prompt and the padding, so the
loss (``response_nll``) counts only what the model should answer. Truncation keeps the prompt whole
where it fits and cuts the response (a prompt longer than ``max_len`` keeps its first tokens and no
response: the row then adds nothing to the loss).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

IGNORE = -100
TEMPLATE = "{prompt}\nAnswer:"  # what the model sees before the response, in training and generation


def prompt_ids(tokenizer: Any, prompt: str, *, template: str = TEMPLATE) -> list[int]:
    """The tokens that precede a response (also what generation starts from)."""
    return list(tokenizer(template.format(prompt=prompt), add_special_tokens=False)["input_ids"])


@dataclass(frozen=True)
class Rows:
    """Right-padded (N, max_len) ids and labels, real lengths and prompt lengths."""

    ids: np.ndarray
    labels: np.ndarray
    lengths: np.ndarray
    prompt_lengths: np.ndarray


def encode_instructions(tokenizer: Any, prompts: Any, responses: Any, *, max_len: int,
                        template: str = TEMPLATE) -> Rows:
    """Token rows of prompt/response pairs with the prompt masked out of the labels."""
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    n = len(prompts)
    ids = np.full((n, max_len), pad, dtype=np.int64)
    labels = np.full((n, max_len), IGNORE, dtype=np.int64)
    lengths, plens = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        head = prompt_ids(tokenizer, str(p), template=template)[:max_len]
        answer = list(tokenizer(" " + str(r), add_special_tokens=False)["input_ids"]) + [eos]
        row = (head + answer)[:max_len]
        ids[i, :len(row)] = row
        labels[i, len(head):len(row)] = row[len(head):]
        lengths[i], plens[i] = len(row), len(head)
    return Rows(ids, labels, lengths, plens)


def response_nll(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Summed next-token negative log-likelihood over the labelled (response) positions and their count:
    the logits at position t predict the label at t + 1."""
    pred, target = logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)
    nll = torch.nn.functional.cross_entropy(pred.float(), target, ignore_index=IGNORE, reduction="sum")
    return nll, int((target != IGNORE).sum())
