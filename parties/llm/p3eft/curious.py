"""What an honest-but-curious model server computes from what it keeps: P3EFT §3.3's θ-difference
attack and the concatenation of every adapter's activations.

The server keeps, per training step it served, the inputs x_t and the adapters θ_i^t it received
(``Curious.note``). At ``query.log`` it runs, for successive steps t < t' it saw of one adapter set:
g_θ from θ_i^t and θ_i^{t'} by inverting the client's optimizer (its kind and lr are the public
recipe; exact for SGD when t' = t + 1), then g_h from Jᵀ g_h = g_θ by least squares with the
Jacobian of its own model at (x_t, θ_i^t) (``recover_cotangent``). It also computes
[h(x, θ_1) … h(x, θ_n)] for every step where it holds all n adapter sets (it has the model and the
adapters, so it can: the mixing weights W do not hide a linear function of this concatenation).
Both come back as extra rows of its log (``theta_*``: recovered g_h rows, ``cat_*``: concatenated
activations), keyed like the others, for the experimenter to score against the true labels.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from parties.llm.common.arch import Arch
from parties.llm.p3eft.adapters import LoraEncoder
from vfl.attacks.theta_difference import cgls, optimizer_gradient


def _flat(adapter: Mapping[str, torch.Tensor], names: list[str]) -> torch.Tensor:
    return torch.cat([torch.as_tensor(adapter[n]).reshape(-1).to(torch.float64) for n in names])


@contextmanager
def _eager_attention(model: LoraEncoder) -> Iterator[None]:
    """Eager attention for the call: fused SDPA kernels have no double backward (J u needs one)."""
    enc: Any = model.encoder  # a transformers PreTrainedModel (typed as nn.Module)
    old = getattr(enc.config, "_attn_implementation", None)
    if old in (None, "eager") or not hasattr(enc, "set_attn_implementation"):
        yield
        return
    enc.set_attn_implementation("eager")
    try:
        yield
    finally:
        enc.set_attn_implementation(old)


def recover_cotangent(model: LoraEncoder, ids: torch.Tensor, lengths: torch.Tensor, adapter: Mapping[str, torch.Tensor],
                      g_theta: torch.Tensor, *, iters: int = 60) -> torch.Tensor:
    """g_h (B, d) minimizing ‖Jᵀ g_h − g_θ‖ with J = ∂h(x, θ)/∂θ of the server's own model (flat g_θ in
    the order of ``model.slots``). Jᵀ v is one backward; J u one double-backward through it."""
    model.load(adapter)
    slots = list(model.slots.values())
    width = max(1, int(lengths.max()))
    with torch.enable_grad(), model._float32(), _eager_attention(model):
        h = model.activations(ids[:, :width], lengths)
        u = torch.zeros_like(h, requires_grad=True)
        gth = torch.autograd.grad(h, slots, grad_outputs=u, create_graph=True, allow_unused=True,
                                  materialize_grads=True)

        def jt(v: torch.Tensor) -> torch.Tensor:
            out = torch.autograd.grad(h, slots, grad_outputs=v.to(device=h.device, dtype=h.dtype), retain_graph=True,
                                      allow_unused=True, materialize_grads=True)
            return torch.cat([t.reshape(-1) for t in out]).detach().cpu()

        def j(r: torch.Tensor) -> torch.Tensor:
            parts, at = [], 0
            for p in slots:
                parts.append(r[at: at + p.numel()].reshape(p.shape).to(device=p.device, dtype=p.dtype))
                at += p.numel()
            live = [(g, c) for g, c in zip(gth, parts, strict=True) if g.requires_grad]
            if not live:
                return torch.zeros(h.shape, dtype=torch.float64)
            (out,) = torch.autograd.grad([g for g, _ in live], u, grad_outputs=[c for _, c in live],
                                         retain_graph=True, allow_unused=True, materialize_grads=True)
            return out.detach().cpu()

        return cgls(jt, j, g_theta, shape=tuple(h.shape), iters=iters)


@dataclass(frozen=True)
class OptimizerGuess:
    """The client's optimizer as the server assumes it (the public recipe: kind, lr, momentum, decay)."""

    name: str
    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0


@dataclass
class Seen:
    """One adapter set at one step: the inputs and the adapter tensors received."""

    ids: torch.Tensor
    lengths: torch.Tensor
    adapter: dict[str, torch.Tensor]
    attacked: bool = False  # already the first step of an attacked pair


@dataclass
class Curious:
    """The server's keep of (x_t, θ_i^t) and the attacks it runs on them (``steps``: pairs attacked per
    log drain per adapter set, evenly spread; 0 = none). With ``steps_per_epoch`` (public: the batch
    schedule) only the steps around ``steps`` evenly spread targets t are kept (t − 1 … t + 3: the
    momentum buffer, the pair (t, t + 1), or (t + 1, t + 3) for a server that sees every other
    step), so memory stays ≤ 5·steps adapter states per set; the concatenation is computed on them."""

    optimizer: OptimizerGuess
    steps: int = 8
    iters: int = 60
    concat: bool = True
    steps_per_epoch: int = 0  # 0: keep every step (tests, tiny runs)
    seen: dict[int, dict[tuple[int, int], Seen]] = field(default_factory=dict)  # adapter -> (epoch, step) -> Seen

    def note(self, *, epoch: int, step: int, adapter: int, ids: torch.Tensor, lengths: torch.Tensor,
             tensors: Mapping[str, torch.Tensor]) -> None:
        """Keep the first (x, θ) received for this (epoch, step, adapter set)."""
        if self.steps_per_epoch and not any(step - t in (-1, 0, 1, 2, 3) for t in self._targets()):
            return
        per = self.seen.setdefault(adapter, {})
        if (epoch, step) not in per and tensors:
            per[(epoch, step)] = Seen(ids.clone(), lengths.clone(), {k: torch.as_tensor(v).clone() for k, v in tensors.items()})

    def state(self) -> dict[str, Any]:
        """What it keeps, as a checkpoint holds it (tensors, lists, ints)."""
        return {"seen": [[a, e, t, seen.ids, seen.lengths, dict(seen.adapter), seen.attacked]
                         for a, per in sorted(self.seen.items()) for (e, t), seen in sorted(per.items())]}

    def load(self, state: dict[str, Any]) -> None:
        self.seen = {}
        for a, e, t, ids, lengths, adapter, attacked in state.get("seen", []):
            self.seen.setdefault(int(a), {})[(int(e), int(t))] = Seen(ids, lengths, dict(adapter), bool(attacked))

    def _targets(self) -> list[int]:
        spe = self.steps_per_epoch
        return sorted({int(round(x)) for x in np.linspace(0, max(spe - 4, 0), self.steps)}) if self.steps else []

    def _pairs(self, order: list[tuple[int, int]]) -> list[int]:
        """Indices i of the pairs (order[i], order[i + 1]) to attack: evenly spread over what is kept, or
        with ``steps_per_epoch`` the first pair at most two steps apart starting at t or t + 1 per target."""
        if not self.steps_per_epoch:
            pairs = list(range(len(order) - 1))
            if self.steps and len(pairs) > self.steps:
                pairs = sorted({int(round(i)) for i in np.linspace(0, len(pairs) - 1, self.steps)})
            return pairs if self.steps else []
        taken: set[tuple[int, int]] = set()
        out = []
        for i in range(len(order) - 1):
            (e, s), (e2, s2) = order[i], order[i + 1]
            hit = [t for t in self._targets() if s in (t, t + 1) and (e, t) not in taken]
            if hit and e2 == e and s2 - s <= 2:
                taken.add((e, hit[0]))
                out.append(i)
        return out

    def run(self, model: LoraEncoder) -> dict[str, dict[str, np.ndarray]]:
        """Recovered g_h rows and concatenated activations since the last call, keyed (epoch, step,
        adapter, row); keeps the last two steps of each set to pair with the next ones."""
        theta_rows: list[np.ndarray] = []
        theta_keys: list[np.ndarray] = []
        cat_rows: list[np.ndarray] = []
        cat_keys: list[np.ndarray] = []
        names = list(model.slots)
        opt = self.optimizer
        for a, per in sorted(self.seen.items()):
            order = sorted(per)
            for i in self._pairs(order):
                t, t2 = order[i], order[i + 1]
                if per[t].attacked:
                    continue
                theta, nxt = _flat(per[t].adapter, names), _flat(per[t2].adapter, names)
                prev = ((_flat(per[order[i - 1]].adapter, names) - theta) / opt.lr if i > 0
                        else torch.zeros_like(theta) if t == (0, 0) else None)
                g_theta, _ = optimizer_gradient(theta, nxt, optimizer=opt.name, lr=opt.lr, momentum=opt.momentum,
                                                weight_decay=opt.weight_decay, prev_buf=prev)
                g_h = recover_cotangent(model, per[t].ids, per[t].lengths, per[t].adapter, g_theta, iters=self.iters)
                per[t].attacked = True
                theta_rows.append(g_h.numpy().astype(np.float32))
                theta_keys.append(_keys(t, a, len(g_h)))
        if self.concat and len(self.seen) > 1:
            common = set.intersection(*(set(per) for per in self.seen.values()))
            for t in sorted(common):
                first = self.seen[min(self.seen)][t]
                hs = [model.forward(first.ids, first.lengths, self.seen[a][t].adapter) for a in sorted(self.seen)]
                cat_rows.append(torch.cat(hs, 1).cpu().numpy().astype(np.float32))  # the server's device
                cat_keys.append(_keys(t, -1, len(first.ids)))
        for per in self.seen.values():  # keep the last two steps: the pair across the drain, momentum
            order = sorted(per)
            for t in order[:-2]:
                del per[t]
            if len(order) >= 2:
                per[order[-2]].attacked = True
        dim = Arch.output_size(model.encoder.config)
        return {"theta": _stack(theta_rows, theta_keys, dim), "cat": _stack(cat_rows, cat_keys, dim)}


def _keys(t: tuple[int, int], adapter: int, n: int) -> np.ndarray:
    k = np.zeros((n, 4), dtype=np.int64)
    k[:, 0], k[:, 1], k[:, 2], k[:, 3] = t[0], t[1], adapter, np.arange(n)
    return k


def _stack(rows: list[np.ndarray], keys: list[np.ndarray], dim: int) -> dict[str, np.ndarray]:
    if not rows:
        return {"rows": np.zeros((0, dim), np.float32), "keys": np.zeros((0, 4), np.int64)}
    return {"rows": np.concatenate(rows), "keys": np.concatenate(keys)}
