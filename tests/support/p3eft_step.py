"""One P3EFT step through a model server, checked: private backprop (m = 2 noisy pieces) recombines to
the autograd gradient, and a small SGD step on the adapters lowers the loss (shared by the family tests)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from parties.llm.p3eft.adapters import LoraEncoder, init_adapters
from parties.llm.p3eft.private_backprop import recombine, split_gradient
from vfl.core.rng import NoiseSource


def check_private_backprop_step(server: LoraEncoder, ids: torch.Tensor, mask: torch.Tensor, *, width: int,
                                tag: str) -> dict[str, torch.Tensor]:
    """Runs the step on a batch of 4 (labels 0,1,0,1) and returns the recombined adapter gradients."""
    adapter = init_adapters(server.shapes, generator=torch.Generator().manual_seed(0))
    adapter = {k: v if ".lora_A." in k else torch.full_like(v, 0.05) for k, v in adapter.items()}
    lengths = mask.sum(1)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        head = torch.nn.Linear(width, 2)
    y = torch.tensor([0, 1, 0, 1])

    def loss_of(ad: dict[str, torch.Tensor]) -> float:
        with torch.no_grad():
            return float(F.cross_entropy(head(server.forward(ids, lengths, ad)), y))

    h = server.forward(ids, lengths, adapter).requires_grad_(True)
    loss = F.cross_entropy(head(h), y)
    (g_h,) = torch.autograd.grad(loss, h)
    pieces, alphas = split_gradient(g_h, m=2, std=30 * float(g_h.pow(2).mean().sqrt()),
                                    noise=NoiseSource.seeded(tag, 0))
    private = recombine([server.backprop(ids, lengths, adapter, p) for p in pieces], alphas)
    plain = server.backprop(ids, lengths, adapter, g_h)
    scale = max(float(ref.abs().max()) for ref in plain.values())  # float32: noise 30x g_h costs ~30 ulps
    for name, ref in plain.items():  # the VJPs run in float32 whatever the weights' dtype
        torch.testing.assert_close(private[name], ref, rtol=1e-3, atol=1e-4 * scale)
    stepped = {k: v - 1e-2 / scale * private[k] for k, v in adapter.items()}  # small: first order holds
    assert loss_of(stepped) < float(loss.detach())
    return private
