"""Embedding inversion attacks (EIA) on the representations a vendor received (SAP §5.1).

- ``nearest_neighbor_inversion``: each received vector -> the closest token embedding (for a
  split after the embedding layer; Qu et al. 2021).
- ``optimization_inversion``: for deeper splits, optimize relaxed word-selection logits Z so that
  bottom(softmax(Z/T)·W_emb) matches the received representation (Song & Raghunathan 2020),
  then read the tokens off argmax Z. White-box: the attacker holds the initial bottom weights.
- ``train_inverter`` / ``learned_inversion``: a learned inverter (BiSR-style) trained on (feature,
  token) pairs the attacker makes itself from public text through the public bottom and the public
  release mechanism, then applied to every received vector (any depth; a denoiser under dχ noise).
Success = token recovery rate; empirical privacy EP = 1 − success.
"""

from __future__ import annotations

import copy
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


class TokenInverter(torch.nn.Module):
    """Learned per-position inverter (BiSR-style, Chen et al. 2024; He et al. 2019's inverse network):
    received vector -> token logits. Tied to the public vocabulary W and free of per-token parameters (so
    it generalizes to tokens its training sample never held): ``τ·(y·wᵀ − s‖w‖²/2)`` with ``y = x + f(LN(x))``,
    ``f`` a zero-initialized MLP, s = τ = 1 at the start: it starts as the nearest-neighbour attack
    (−‖y − w‖²/2 up to a constant) and learns to map deeper representations back and to denoise."""

    def __init__(self, *, vocab: torch.Tensor, hidden: int, in_dim: int | None = None) -> None:
        super().__init__()
        d = vocab.shape[1]
        in_dim = d if in_dim is None else in_dim
        self.register_buffer("vocab", vocab.detach().float().clone())
        # received vectors wider or narrower than the table (ELECTRA's, OPT's projected embeddings): a linear
        # map into the table's space first (``train_inverter`` starts it at the least-squares fit)
        self.proj = None if in_dim == d else torch.nn.Linear(in_dim, d)
        self.norm = torch.nn.LayerNorm(in_dim)
        out = torch.nn.Linear(hidden, d)
        torch.nn.init.zeros_(out.weight)
        torch.nn.init.zeros_(out.bias)
        self.net = torch.nn.Sequential(torch.nn.Linear(in_dim, hidden), torch.nn.GELU(), out)
        self.half_norm = torch.nn.Parameter(torch.ones(()))  # s
        self.log_scale = torch.nn.Parameter(torch.zeros(()))  # log τ

    def forward(self, x: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Logits over the vocabulary (or over its ``rows`` only: a sampled softmax while training)."""
        x = x.float()
        w = self.vocab if rows is None else self.vocab[rows]  # type: ignore[index]
        y = (x if self.proj is None else self.proj(x)) + self.net(self.norm(x))
        logits = y @ w.T - 0.5 * self.half_norm * (w * w).sum(1)  # type: ignore[operator]
        return self.log_scale.exp() * logits  # type: ignore[no-any-return]


def train_inverter(*, features: torch.Tensor, tokens: torch.Tensor, vocab: torch.Tensor, hidden: int, epochs: int,
                   lr: float, batch_size: int, generator: torch.Generator, negatives: int = 0,
                   holdout: float = 0.0) -> TokenInverter:
    """Fit a :class:`TokenInverter` on the attacker's own (feature, token) pairs (T, d), (T,): features it
    made from public text with the public bottom (and the public release mechanism), cross-entropy, Adam.
    ``negatives`` > 0: a sampled softmax over the batch's tokens plus that many uniform rows (a large
    vocabulary on CPU); 0 = the full vocabulary. ``holdout`` > 0: that share of the pairs is kept aside
    and the state (initial one included: the nearest-neighbour decoder) with the best token accuracy on
    it is returned, so the attacker never ends worse than its start on its own data."""
    if features.shape[0] != tokens.shape[0] or features.shape[0] == 0:
        raise ValueError(f"train_inverter: {features.shape[0]} features for {tokens.shape[0]} tokens")
    model = TokenInverter(vocab=vocab, hidden=hidden, in_dim=features.shape[1]).to(features.device)
    perm = torch.randperm(features.shape[0], generator=generator, device=generator.device).to(features.device)
    cut = int(round(holdout * features.shape[0]))
    held, fit = perm[:cut], perm[cut:]
    if model.proj is not None:  # start from the least-squares map of the features onto their tokens' rows
        x = torch.cat([features[fit].float(), torch.ones(len(fit), 1, device=features.device)], dim=1)
        sol = torch.linalg.lstsq(x.cpu(), vocab[tokens[fit]].detach().float().cpu()).solution.to(features.device)
        with torch.no_grad():
            model.proj.weight.copy_(sol[:-1].T)
            model.proj.bias.copy_(sol[-1])
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def score() -> float:
        if not cut:
            return 0.0
        model.eval()
        got = learned_inversion(features[held], inverter=model)
        model.train()
        return float((got == tokens[held]).double().mean())

    best, best_state = score(), copy.deepcopy(model.state_dict())
    n = len(fit)
    for _ in range(epochs):
        order = fit[torch.randperm(n, generator=generator, device=generator.device).to(features.device)]
        for i in range(0, n, batch_size):
            sel = order[i : i + batch_size]
            opt.zero_grad(set_to_none=True)
            target = tokens[sel]
            if 0 < negatives < vocab.shape[0]:
                extra = torch.randint(vocab.shape[0], (negatives,), generator=generator, device=generator.device)
                rows = torch.unique(torch.cat([target, extra.to(target.device)]))
                logits, target = model(features[sel], rows), torch.searchsorted(rows, target)
            else:
                logits = model(features[sel])
            loss = torch.nn.functional.cross_entropy(logits, target)
            loss.backward()
            opt.step()
        if cut and (now := score()) > best:
            best, best_state = now, copy.deepcopy(model.state_dict())
    if cut:
        model.load_state_dict(best_state)
    return model.eval()


def learned_inversion(reps: torch.Tensor, *, inverter: TokenInverter, chunk: int = 1024) -> torch.Tensor:
    """(T, d) received vectors -> (T,) guessed token ids (argmax of the trained inverter's logits)."""
    out = torch.empty(reps.shape[0], dtype=torch.long, device=reps.device)
    with torch.no_grad():
        for i in range(0, reps.shape[0], chunk):
            out[i : i + chunk] = inverter(reps[i : i + chunk]).argmax(-1)
    return out
