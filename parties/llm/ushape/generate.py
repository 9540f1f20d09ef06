"""Greedy decoding through a split model, one batch of prompts at a time.

``Greedy`` is the decoding state alone: right-padded sequences that each grow by one token per call
of ``advance`` (the argmax of the logits at its last real position) until eos, ``max_new`` tokens or
the end of the model's position table (``positions``).
Under causal attention the padding after a row's last real token changes none of its logits, so a
batch of prompts of different lengths decodes together without a KV cache (every step re-runs the
whole prefix: exact, quadratic in the length). The client node drives it over the wire (head ->
model server -> tail per token); ``generate`` drives it with the three parts in one process (the
``vfl generate`` command).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from parties.llm.ushape.parts import real_mask


class Greedy:
    """The growing sequences of one batch of prompts (token id lists)."""

    def __init__(self, prompts: Sequence[Sequence[int]], *, eos: int, pad: int, max_new: int,
                 positions: int | None = None) -> None:
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("greedy decoding needs at least one prompt, each with at least one token")
        if positions is not None and max(len(p) for p in prompts) > positions:
            raise ValueError(f"a prompt is longer than the model's {positions} positions")
        self.eos, self.max_new = eos, max_new
        width = max(len(p) for p in prompts) + max_new
        self.width = width if positions is None else min(width, positions)  # a row stops at the position table's end
        self.ids = np.full((len(prompts), width), pad, dtype=np.int64)
        for i, p in enumerate(prompts):
            self.ids[i, :len(p)] = p
        self.start = np.array([len(p) for p in prompts], dtype=np.int64)
        self.lengths = self.start.copy()
        self.done = self.start >= self.width if max_new > 0 else np.ones(len(prompts), dtype=bool)

    @property
    def finished(self) -> bool:
        return bool(self.done.all())

    def batch(self) -> tuple[np.ndarray, np.ndarray]:
        """The current rows (cut to the longest) and their real lengths."""
        return self.ids[:, : int(self.lengths.max())], self.lengths.copy()

    def advance(self, last_logits: np.ndarray) -> None:
        """Append each unfinished row's argmax token ((B, V) logits at its last real position)."""
        nxt = np.asarray(last_logits).argmax(-1)
        for i in np.flatnonzero(~self.done):
            self.ids[i, self.lengths[i]] = nxt[i]
            self.lengths[i] += 1
            if nxt[i] == self.eos or self.lengths[i] - self.start[i] >= self.max_new or self.lengths[i] >= self.width:
                self.done[i] = True

    def outputs(self) -> list[list[int]]:
        """The generated tokens of each row, without the prompt and without a final eos."""
        out = []
        for row, s, n in zip(self.ids, self.start, self.lengths, strict=True):
            toks = row[s:n].tolist()
            out.append(toks[:-1] if toks and toks[-1] == self.eos else toks)
        return out


def last_logits(logits: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, L, V) -> (B, V): the logits at each row's last real position."""
    return logits[torch.arange(len(lengths), device=logits.device), lengths.to(logits.device) - 1]


Part = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@torch.no_grad()
def generate(*, head: Part, body: Part, tail: Part, prompts: Sequence[Sequence[int]], eos: int, pad: int,
             max_new: int, positions: int | None = None, device: str = "cpu") -> list[list[int]]:
    """Greedy continuations of ``prompts`` through head -> body -> tail in one process."""
    g = Greedy(prompts, eos=eos, pad=pad, max_new=max_new, positions=positions)
    while not g.finished:
        ids, lengths = g.batch()
        x, n = torch.as_tensor(ids, device=device), torch.as_tensor(lengths, device=device)
        mask = real_mask(n, x.shape[1])
        g.advance(last_logits(tail(body(head(x, mask), mask), mask), n).cpu().numpy())
    return g.outputs()
