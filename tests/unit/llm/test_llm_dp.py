"""privacy.bottom_dp on split LLMs (split-lora, p3eft, head-only): DP-SGD of the client's adapters + head
(Li et al., ICLR 2022) with exact per-example gradients through the model servers, clipping, noise from
the client's own source, and the accountant against dp_accounting. Tiny random Llama, in-process."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import strategies  # noqa: F401
from parties.llm.common.arch import arch_of
from parties.llm.common.backbone import load_encoder, load_tokenizer
from parties.llm.common.lora import lora_spec_for
from parties.llm.p3eft.adapters import LoraEncoder, init_adapters
from parties.llm.p3eft.dp_sgd import (
    clip_and_noise,
    expand_rows,
    per_example,
    per_example_head,
)
from parties.llm.p3eft.private_backprop import PER_EXAMPLE, split_gradient
from vfl.core.errors import ConfigError
from vfl.core.rng import NodeNoise, NoiseSource
from vfl.engine.schema import load_run_config
from vfl.privacy.accounting.accountant import DEFAULT_ORDERS, Accountant
from vfl.privacy.accounting.events import LoraDPSGDEvent, event_from_dict, event_to_dict
from vfl.privacy.accounting.scope import SCOPE_LLM_DPSGD

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
TEXTS = ["a gripping film", "the plot is thin and the jokes fall flat", "dull", "one of the best movies",
         "tedious, overlong and painfully predictable"]
DP = {"noise_multiplier": 1.0, "max_grad_norm": 0.5}


# ---- exact per-example gradients through the protocol's pieces -------------------------------
@pytest.mark.parametrize("m", [1, 2, PER_EXAMPLE])
def test_per_example_gradients_through_the_servers_are_exact(llama, m):
    """Row-pieces sent to the server, recombined per example, give each example's own gradient of
    ℓ_i w.r.t. the adapter (plain, P3EFT's random pieces, m = B), and vmap gives the head's."""
    model = load_encoder(llama)
    server = LoraEncoder(model, lora_spec_for(arch_of(model), rank=2, alpha=4.0), pooling="last")
    batch = load_tokenizer(llama)(TEXTS, padding=True, return_tensors="pt")
    ids, lengths = batch["input_ids"], batch["attention_mask"].sum(1)
    gen = torch.Generator().manual_seed(0)
    adapter = {k: v if ".lora_A." in k else 0.1 * torch.randn(v.shape, generator=gen)
               for k, v in init_adapters(server.shapes, generator=gen).items()}
    head, y, w = torch.nn.Linear(32, 3), torch.tensor([0, 2, 1, 1, 0]), torch.ones(1, 32, dtype=torch.float64)
    h = server.forward(ids, lengths, adapter)
    g_head, g_acts, _ = per_example_head(head, [h], w, y)
    pieces, alphas = split_gradient(g_acts[0], m=m, std=30 * float(g_acts[0].pow(2).mean().sqrt()),
                                    noise=NoiseSource.seeded("test-llm-dp", 1))
    rows_pieces, row_alphas, origin, rows = expand_rows(pieces, alphas)
    assert all(int((p.abs().sum(-1) > 0).sum()) == 1 for p in rows_pieces)  # one example per piece
    assert sorted(set(origin)) == list(range(len(pieces)))
    got = per_example(server.backprop_many(ids, lengths, adapter, rows_pieces), row_alphas, rows,
                      batch=len(TEXTS), shapes=server.shapes)
    server.load(adapter)
    for i in range(len(TEXTS)):  # the reference: example i alone through the whole model, plain autograd
        with torch.enable_grad():
            hi = server.activations(ids[i:i + 1, : int(lengths[i])], lengths[i:i + 1])
            loss = F.cross_entropy(head(hi), y[i:i + 1])
            want = torch.autograd.grad(loss, [*server.slots.values(), *head.parameters()])
        for name, ref in zip([*server.slots, *(n for n, _ in head.named_parameters())], want, strict=True):
            mine = got[name][i] if name in got else g_head[name][i]
            scale = float(ref.abs().max()) + 1e-12
            torch.testing.assert_close(mine.to(torch.float32), ref, rtol=1e-3, atol=2e-4 * scale)


# ---- clipping and noise ------------------------------------------------------------------------
def test_every_example_is_clipped_to_c_jointly_before_the_noise():
    gen = torch.Generator().manual_seed(2)
    scales = torch.tensor([1e-3, 0.2, 0.9, 3.0, 50.0, 1e4], dtype=torch.float64)
    per_ex = {"head/w": torch.randn(6, 3, 4, generator=gen, dtype=torch.float64) * scales[:, None, None],
              "adapter0/a": torch.randn(6, 7, generator=gen, dtype=torch.float64) * scales[:, None]}
    c = 1.0
    out, clipped = clip_and_noise(per_ex, max_grad_norm=c, noise_multiplier=0.0,
                                  noise=NoiseSource.seeded("unused", 0), batch_size=6)
    norms = torch.sqrt(per_ex["head/w"].flatten(1).pow(2).sum(1) + per_ex["adapter0/a"].pow(2).sum(1))
    assert bool((clipped <= c).all()) and bool((norms > c).any()) and bool((norms < c).any())
    torch.testing.assert_close(clipped, torch.minimum(norms, torch.full_like(norms, c)), rtol=1e-5, atol=1e-9)
    factor = torch.minimum(torch.ones(6, dtype=torch.float64), c / norms)  # the per-example clip, by hand
    for name, g in per_ex.items():
        want = (factor.view(-1, *[1] * (g.dim() - 1)) * g).sum(0) / 6
        torch.testing.assert_close(out[name], want, rtol=1e-5, atol=1e-9)


def test_noise_std_is_sigma_times_c_and_comes_from_the_node():
    sigma, c, batch, dim = 1.5, 0.4, 4, 200_000
    zeros = {"adapter0/a": torch.zeros(batch, dim, dtype=torch.float64)}

    def draw(noise: NodeNoise) -> torch.Tensor:
        torch.manual_seed(0)  # torch's generator plays no part
        out, _ = clip_and_noise(zeros, max_grad_norm=c, noise_multiplier=sigma, batch_size=batch,
                                noise=noise.round("dpsgd", phase="train", epoch=0, step=0))
        return out["adapter0/a"] * batch

    z = draw(NodeNoise("crypto", seed=7, node=1))
    assert abs(float(z.std()) / (sigma * c) - 1) < 0.01 and abs(float(z.mean())) < 0.01 * sigma * c
    assert not torch.equal(z, draw(NodeNoise("crypto", seed=7, node=1)))  # OS-keyed: no one replays it
    torch.testing.assert_close(draw(NodeNoise("seeded", seed=7, node=1)), draw(NodeNoise("seeded", seed=7, node=1)))


# ---- accountant --------------------------------------------------------------------------------
@pytest.mark.parametrize("nm,epochs,delta", [(1.0, 1, 1e-5), (0.7, 5, 1e-5), (3.0, 30, 1e-6)])
def test_accountant_matches_dp_accounting(nm, epochs, delta):
    """Each example is in one step per epoch (fixed public schedule: q = 1), replace-one sensitivity 2C:
    ``epochs`` Gaussians of noise multiplier nm/2, composed by dp_accounting's RDP accountant."""
    import dp_accounting
    from dp_accounting import rdp

    acc = Accountant()
    acc.record(LoraDPSGDEvent(noise_multiplier=nm, max_grad_norm=0.3, count=epochs))
    ref = rdp.RdpAccountant(list(DEFAULT_ORDERS))
    ref.compose(dp_accounting.PoissonSampledDpEvent(1.0, dp_accounting.GaussianDpEvent(nm / 2)), epochs)
    assert acc.epsilon(delta)[0] == pytest.approx(ref.get_epsilon(delta), rel=1e-9)
    assert acc.scope() == SCOPE_LLM_DPSGD
    assert Accountant.from_json(acc.to_json()).epsilon(delta) == acc.epsilon(delta)
    assert isinstance(event_from_dict(event_to_dict(acc.events[0])), LoraDPSGDEvent)


# ---- configuration -----------------------------------------------------------------------------
@pytest.mark.parametrize("strategy,params,key", [
    ("dcor", {}, "privacy.bottom_dp"),
    ("pslf", {}, "privacy.bottom_dp"),
    ("sap", {}, "privacy.bottom_dp"),
    ("p3eft", {}, "params.alpha"),  # default alpha 3.16: the probe couples the batch
])
def test_refused_where_per_example_clipping_bounds_nothing(strategy, params, key):
    with pytest.raises(ConfigError) as err:
        load_run_config({"strategy": strategy, "num_parties": 1, "privacy": {"bottom_dp": DP}, "params": params})
    assert err.value.key == key and "\n" not in str(err.value)


def test_target_epsilon_calibrates_the_noise_multiplier():
    base = {"strategy": "split-lora", "num_parties": 1, "train": {"epochs": 3}}
    with pytest.raises(ConfigError) as err:
        load_run_config({**base, "privacy": {"target_epsilon": 4.0}})
    assert err.value.key == "privacy.target_epsilon" and "privacy.bottom_dp" in str(err.value)
    cfg = load_run_config({**base, "privacy": {"target_epsilon": 4.0, "bottom_dp": DP}})
    dp = cfg.privacy.bottom_dp
    assert dp.max_grad_norm == DP["max_grad_norm"] and dp.noise_multiplier != DP["noise_multiplier"]
    acc = Accountant()
    acc.record(LoraDPSGDEvent(noise_multiplier=dp.noise_multiplier, max_grad_norm=dp.max_grad_norm, count=3))
    assert 4.0 * 0.999 <= acc.epsilon(cfg.privacy.delta)[0] <= 4.0
    from simulations.cli.run_facts import calibrated_params

    assert calibrated_params(cfg) == {"privacy.bottom_dp.noise_multiplier": dp.noise_multiplier}  # summary.json


