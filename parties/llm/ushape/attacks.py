"""What a model server of the U-shaped split reads from what it receives, with what it holds: the
pretrained model (it owns it) and the run's seed (it builds the same parts). Played by the tests
(``tests/engine/llm/test_ushape_privacy.py``, each with its control) and by ``vfl report`` on a run
with recorded views (``ushape_leak``).

- ``labels_from_gradient``: dLoss/d(body output) at the first step, where the tail's adapters are
  still zero. Per position, N·dLoss/dh_t = J_tᵀ p_t − J_tᵀ e_y with J_t the Jacobian of the pretrained
  tail's logits at t, p_t its softmax and N the labelled positions; J_tᵀ e_y is row y of J_t, so y is
  the row nearest J_tᵀ p_t − N·dLoss/dh_t. With tail blocks, attention mixes positions: each row is
  solved from its end (the last labelled position gets a contribution from its own logits only; N is
  fitted there), subtracting the contributions of the positions already named, until nothing
  explains the residual (the prompt). One Jacobian (V × d) per position: for small models.
- ``labels_from_update``: ``ushape-p3eft``'s θ-difference (P3EFT §3.3). The adapters of the second
  request minus the clean initial ones (B = 0, A from the seed) are AdamW's first update,
  −lr·sign(g_θ); g_θ = Σ_t (∂logits_t/∂θ)ᵀ(p_t − e_{y_t})/N, so the labels that best agree with that
  sign pattern s are y_t = argmin_y (∂logits_t/∂θ · s)_y: one directional derivative of the body +
  tail along s.
- ``tokens_nearest``: the head's release at split 0 is the token embeddings (± dχ noise): the nearest
  row of the embedding table names each token.
Every function returns guesses per packed real token (the wire's order); the caller scores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from parties.llm.common.wire import pack, unpack
from parties.llm.ushape.parts import Body, Tail
from vfl.privacy.mechanisms.dchi import nearest_rows

NONE = -1  # a position the attack names no token for


def _row_logits(tail: Tail, h: torch.Tensor) -> torch.Tensor:
    """Logits (n, V) of one row (n, d) through the tail."""
    return tail(h.unsqueeze(0), torch.ones(1, h.shape[0], dtype=torch.long, device=h.device))[0]


def labels_from_gradient(*, h_in: torch.Tensor, lengths: torch.Tensor, grad: torch.Tensor, body: Body, tail: Tail,
                         labelled: np.ndarray | None = None, rows: int | None = None) -> np.ndarray:
    """Guesses (T,) for the packed positions of one step from the head's release ``h_in`` (T, d), its
    ``lengths`` and the received gradient ``grad`` (T, d). ``labelled``: the positions to name (default:
    where ``grad`` is non-zero, as ``ushape-lora`` sends it; a piece of ``ushape-p3eft`` is non-zero
    everywhere). ``rows``: only the first rows of the batch (tail blocks: one Jacobian per position)."""
    h1, mask = unpack(h_in, lengths)
    with torch.no_grad():
        h2 = body(h1, mask)
    g_rows, _ = unpack(grad, lengths)
    support = grad.abs().sum(1) > 0 if labelled is None else torch.as_tensor(labelled, dtype=torch.bool)
    sup_rows, _ = unpack(support.unsqueeze(-1).to(grad.dtype), lengths)
    n_all = int(support.sum())
    guess = torch.full((len(lengths), int(lengths.max())), NONE, dtype=torch.long)
    if not len(tail.layers):  # the tail is the final norm + the LM head: every position on its own
        return _per_position(h2, g_rows, sup_rows, lengths, tail, n_all, guess)
    kept = []
    for i, n in enumerate(lengths.tolist()[: rows or len(lengths)]):
        h, g, row_sup = h2[i, :n], g_rows[i, :n], sup_rows[i, :n, 0] > 0
        if not bool(row_sup.any()):
            continue
        with torch.no_grad():
            p = torch.softmax(_row_logits(tail, h), -1)
        kept.append((i, h, g, row_sup, int(torch.nonzero(row_sup).max()), p))
    fits = []
    for _, h, g, _, last, p in kept:  # N from each row's last labelled position: N·g_T = J_TTᵀ(p_T − e_y)
        cand = _candidates(tail, h, p, last)
        scale = cand @ g[last] / g[last].dot(g[last]).clamp_min(1e-30)
        fits.append(float(scale[(scale.unsqueeze(1) * g[last] - cand).norm(dim=1).argmin()]))
    big_n = float(np.median(fits)) if fits else float(n_all)
    for i, h, g, named, last, p in kept:
        done = torch.zeros_like(h)  # Σ over named t of ∂(p_t·logits_t − logits_t[y_t])/∂h
        for s in range(last, -1, -1):
            if labelled is not None and not bool(named[s]):
                continue  # told the labelled positions: name only those
            r = big_n * g[s] - done[s]
            err = (r - _candidates(tail, h, p, s)).norm(dim=1)
            if labelled is None and float(err.min()) >= float(r.norm()):
                break  # nothing at s explains the residual: the prompt
            y = int(err.argmin())
            guess[i, s] = y
            x = h.clone().requires_grad_(True)
            out = _row_logits(tail, x)[s]
            (out @ p[s] - out[y]).backward()
            done = done + x.grad
    return pack(guess.unsqueeze(-1), lengths).squeeze(-1).numpy()


def _candidates(tail: Tail, h: torch.Tensor, p: torch.Tensor, s: int) -> torch.Tensor:
    """(V, d): J_ssᵀ(p_s − e_y) for every y, J_ss = ∂logits_s/∂h_s of one row."""
    jac = torch.func.jacrev(lambda x: _row_logits(tail, torch.cat([h[:s], x[None], h[s + 1:]]))[s])(h[s])
    return (jac.T @ p[s]).unsqueeze(0) - jac


def _per_position(h2: torch.Tensor, g_rows: torch.Tensor, sup_rows: torch.Tensor, lengths: torch.Tensor, tail: Tail,
                  n_all: int, guess: torch.Tensor) -> np.ndarray:
    h, g = pack(h2, lengths), pack(g_rows, lengths)
    sup = pack(sup_rows, lengths)[:, 0] > 0

    def logits(x: torch.Tensor) -> torch.Tensor:  # no block in the tail: the final norm and the LM head
        head: Any = tail.lm_head
        return head(x if tail.norm is None else tail.norm(x))  # type: ignore[no-any-return]

    jac = torch.func.vmap(torch.func.jacrev(logits))(h[sup])  # (T, V, d)
    with torch.no_grad():
        p = torch.softmax(logits(h[sup]), -1)
    target = torch.einsum("tv,tvd->td", p, jac) - n_all * g[sup]
    out = pack(guess.unsqueeze(-1), lengths).squeeze(-1).numpy()
    out[sup.numpy()] = (jac - target.unsqueeze(1)).norm(dim=-1).argmin(-1).numpy()
    return out


def labels_from_update(*, h_in: torch.Tensor, lengths: torch.Tensor, clean: Mapping[str, torch.Tensor],
                       second: Mapping[str, torch.Tensor], body: Body, tail: Tail, eps: float = 1e-3) -> np.ndarray:
    """Guesses (T,) of the first step's labels from the body adapters' first update (``second`` − ``clean``),
    run through ``body`` (whose LoRA parameters are overwritten) and the pretrained ``tail``."""
    adapters = {n: p for n, p in body.named_parameters() if "lora_" in n}
    s = {k: -torch.sign(second[k].reshape(clean[k].shape) - clean[k]) for k in adapters}
    h1, mask = unpack(h_in, lengths)

    def logits_at(e: float) -> torch.Tensor:
        with torch.no_grad():
            for k, p in adapters.items():
                p.copy_(clean[k] + e * s[k])
            return pack(tail(body(h1, mask), mask), lengths).double()

    slope = (logits_at(eps) - logits_at(-eps)) / (2 * eps)
    with torch.no_grad():
        for k, p in adapters.items():
            p.copy_(clean[k])
    return slope.argmin(-1).numpy()  # type: ignore[no-any-return]


def tokens_nearest(h_in: torch.Tensor, table: torch.Tensor) -> np.ndarray:
    """Guesses (T,) of the released tokens: the nearest row of the embedding table (split 0)."""
    return nearest_rows(h_in, table=table).numpy()  # type: ignore[no-any-return]
