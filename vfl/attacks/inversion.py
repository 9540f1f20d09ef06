"""Embedding inversion attacks (EIA) on the representations a vendor received (SAP §5.1).

- ``nearest_neighbor_inversion``: each received vector -> the closest token embedding (for a
  split after the embedding layer; Qu et al. 2021).
- ``optimization_inversion``: for deeper splits, optimize relaxed word-selection logits Z so that
  bottom(softmax(Z/T)·W_emb) matches the received representation (Song & Raghunathan 2020),
  then read the tokens off argmax Z. White-box: the attacker holds the initial bottom weights.
Success = token recovery rate; empirical privacy EP = 1 − success.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import torch

from vfl.privacy.mechanisms.dchi import nearest_rows

BottomFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (inputs_embeds, mask) -> reps


def nearest_neighbor_inversion(reps: torch.Tensor, *, vocab: torch.Tensor) -> torch.Tensor:
    """(T, d) received vectors -> (T,) guessed token ids (nearest row of the (V, d) vocabulary)."""
    return nearest_rows(reps, table=vocab)


def optimization_inversion(*, target: torch.Tensor, attention_mask: torch.Tensor, bottom: BottomFn,
                           vocab: torch.Tensor, steps: int, lr: float, temperature: float,
                           generator: torch.Generator) -> torch.Tensor:
    """(B, L, d) received representations -> (B, L) guessed token ids.

    Minimizes the mean cosine distance over real positions between ``bottom(softmax(Z/T) @ vocab)``
    and ``target`` with Adam; ``bottom`` must be differentiable in its input embeddings.
    """
    b, length, _ = target.shape
    vocab = vocab.detach()
    target = target.detach()
    mask = attention_mask.to(target.device)
    z = (0.01 * torch.randn(b, length, vocab.shape[0], generator=generator, device=vocab.device)
         ).to(vocab.dtype).requires_grad_(True)
    opt = torch.optim.Adam([z], lr=lr)
    weight = mask.to(target.dtype)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        embeds = torch.softmax(z / temperature, dim=-1) @ vocab
        out = bottom(embeds, mask)
        dist = 1.0 - torch.nn.functional.cosine_similarity(out, target, dim=-1)
        loss = (dist * weight).sum() / weight.sum().clamp_min(1.0)
        loss.backward()
        opt.step()
    return z.detach().argmax(-1)


def token_recovery(*, predicted: Sequence[Sequence[np.ndarray]], truth: Sequence[np.ndarray],
                   ignore: Iterable[int] = ()) -> float:
    """Share of real (non-``ignore``) token positions recovered by at least one observation.

    ``predicted[i]`` holds one guessed id array per observation of sample ``i`` (several when a
    trainable bottom re-sends a sample every epoch: the attack succeeds on the union).
    """
    skip = np.fromiter(ignore, dtype=np.int64)
    hit = total = 0
    for guesses, true in zip(predicted, truth, strict=True):
        true = np.asarray(true)
        keep = ~np.isin(true, skip)
        found = np.zeros(len(true), dtype=bool)
        for g in guesses:
            found |= np.asarray(g)[: len(true)] == true
        hit += int((found & keep).sum())
        total += int(keep.sum())
    return hit / total if total else float("nan")


def token_recovery_counts(*, predicted: Sequence[Sequence[np.ndarray]], truth: Sequence[np.ndarray],
                          ignore: Iterable[int] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: real tokens recovered by at least one observation, and real tokens (the units of
    ``token_recovery``'s ratio, for a bootstrap interval over samples)."""
    skip = np.fromiter(ignore, dtype=np.int64)
    hits, totals = [], []
    for guesses, true in zip(predicted, truth, strict=True):
        true = np.asarray(true)
        keep = ~np.isin(true, skip)
        found = np.zeros(len(true), dtype=bool)
        for g in guesses:
            found |= np.asarray(g)[: len(true)] == true
        hits.append(int((found & keep).sum()))
        totals.append(int(keep.sum()))
    return np.asarray(hits, dtype=np.int64), np.asarray(totals, dtype=np.int64)
