"""privacy.bottom_dp on split LLMs (split-lora, p3eft, head-only): DP-SGD of the client's adapters + head
(Li et al., ICLR 2022) with exact per-example gradients through the model servers, clipping, noise from
the client's own source, and the accountant against dp_accounting. Tiny random Llama, in-process."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import strategies  # noqa: F401
from parties.llm.common.arch import arch_of
from parties.llm.common.backbone import load_encoder, load_tokenizer
from parties.llm.common.lora import lora_spec_for
from parties.llm.p3eft.adapters import LoraEncoder, init_adapters
from parties.llm.p3eft.dp_sgd import (
    DpLlmClient,
    clip_and_noise,
    expand_rows,
    per_example,
    per_example_head,
)
from parties.llm.p3eft.private_backprop import PER_EXAMPLE, split_gradient
from parties.llm.p3eft.server import ModelServer
from tests.tiny_lms import tiny_lm_dir
from tests.unit.test_sap_nodes import ToySentiment
from vfl.core.errors import ConfigError
from vfl.core.rng import NodeNoise, NoiseSource
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.privacy.accounting.accountant import DEFAULT_ORDERS, Accountant
from vfl.privacy.accounting.events import LoraDPSGDEvent, event_from_dict, event_to_dict
from vfl.privacy.accounting.noise_report import DPSGD_CAVEAT
from vfl.privacy.accounting.scope import SCOPE_LLM_DPSGD
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
TEXTS = ["a gripping film", "the plot is thin and the jokes fall flat", "dull", "one of the best movies",
         "tedious, overlong and painfully predictable"]
DP = {"noise_multiplier": 1.0, "max_grad_norm": 0.5}


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return tiny_lm_dir(tmp_path_factory.mktemp("llama-dp"), "llama")


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


# ---- real runs ---------------------------------------------------------------------------------
def _config(strategy: str, model_dir: str, noise_rng: str = "crypto", epochs: int = 1, budget: float | None = None,
            **extra):
    params = {"max_len": 16, "leak_window": 16, "model_dir": model_dir,
              **({} if strategy == "head-only" else {"lora_rank": 2}), **extra}
    return load_run_config({"strategy": strategy, "num_parties": 1, "seed": 3,
                            "train": {"epochs": epochs, "batch_size": 8, "optimizer": "sgd", "lr": 0.5},
                            "privacy": {"bottom_dp": DP, "noise_rng": noise_rng, "epsilon_budget": budget},
                            "params": params})


def _run(cfg):
    transport = InProcessTransport()
    result = Engine(cfg, transport, ToySentiment(num_train=24, num_test=8), progress=False).run()
    found = [n for h in transport.hosts.values() for n in h.nodes.values()]
    return result.summary, next(n for n in found if not isinstance(n, ModelServer))


@pytest.mark.parametrize("strategy,extra", [("split-lora", {}), ("head-only", {}),
                                            ("p3eft", {"alpha": 0.0, "servers": 2, "m": 2, "n_adapters": 2})])
def test_tiny_runs_train_by_dp_sgd_and_report_epsilon(llama, strategy, extra):
    summary, client = _run(_config(strategy, llama, **extra))
    assert isinstance(client, DpLlmClient)
    acc = Accountant()
    acc.record(LoraDPSGDEvent(count=1, **DP))
    assert summary["epsilon"] == pytest.approx(acc.epsilon(1e-5)[0], rel=1e-12) and math.isfinite(summary["epsilon"])
    assert summary["epsilon_scope"] == SCOPE_LLM_DPSGD
    assert summary["epsilon_is_guarantee"] is False and summary["epsilon_not_exact"] == [DPSGD_CAVEAT]
    assert len(client.last_clipped_norms) == 8 and bool((client.last_clipped_norms <= DP["max_grad_norm"]).all())
    assert float(client.last_clipped_norms.min()) > 0  # every example contributed a gradient
    for a in client.adapters:  # the adapters' B moved (they start at 0) and stay finite
        b = [v for k, v in a.items() if ".lora_B." in k]
        assert b and all(bool(torch.isfinite(v).all()) for v in b) and any(float(v.detach().abs().sum()) > 0 for v in b)


@pytest.mark.slow  # three (two) engine runs
def test_noise_replays_only_when_seeded(llama):
    adapters = {}
    for run, mode in (("s1", "seeded"), ("s2", "seeded"), ("c1", "crypto")):
        adapters[run] = _run(_config("split-lora", llama, noise_rng=mode))[1].adapters[0]
    for k, v in adapters["s1"].items():
        torch.testing.assert_close(adapters["s2"][k], v)
    assert any(not torch.equal(adapters["c1"][k], v) for k, v in adapters["s1"].items() if ".lora_B." in k)


@pytest.mark.slow  # three (two) engine runs
def test_epsilon_budget_stops_before_the_epoch_that_would_pass_it(llama):
    one, two = (Accountant(), Accountant())
    one.record(LoraDPSGDEvent(count=1, **DP))
    two.record(LoraDPSGDEvent(count=2, **DP))
    budget = (one.epsilon(1e-5)[0] + two.epsilon(1e-5)[0]) / 2
    summary, _ = _run(_config("split-lora", llama, epochs=3, budget=budget))
    assert summary["epochs"] == 1 and summary["stopped"]["before_epoch"] == 1
    assert summary["epsilon"] == pytest.approx(one.epsilon(1e-5)[0], rel=1e-12) and summary["epsilon"] <= budget


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


# ---- the attack it mitigates -------------------------------------------------------------------
@pytest.mark.slow
def test_theta_difference_attack_reads_labels_without_dp_and_chance_with_it(llama, tmp_path):
    """P3EFT §3.3's θ-difference attack (``leak_theta``: each model server inverts SGD on the adapters it
    receives and solves Jᵀ g_h = Δθ/lr, then scores the labels). Control: without DP it reads the labels;
    with ``privacy.bottom_dp`` the adapter sequence is DP and it reads near chance."""
    from simulations.cli.runner import execute, resolve_config

    def run(name: str, **privacy):
        raw = {"name": name, "strategy": "p3eft", "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
               "data": {"train_subsample": 96, "test_subsample": 16},
               "train": {"epochs": 1, "batch_size": 16, "optimizer": "sgd", "lr": 0.01},
               "privacy": privacy,
               "params": {"max_len": 16, "model_dir": llama, "lora_rank": 4, "leak_window": 96,
                          "leak_theta_steps": 5, "alpha": 0.0}}
        return execute(resolve_config(raw), out_dir=tmp_path / name, progress=False).summary

    control = run("control")
    assert control["leak_theta"] > 0.9 and "epsilon" not in control
    dp = run("dp", bottom_dp={"noise_multiplier": 1.0, "max_grad_norm": 0.1})
    assert dp["leak_theta"] < 0.75 and math.isfinite(dp["epsilon"]) and dp["epsilon_scope"] == SCOPE_LLM_DPSGD


@pytest.mark.ray
@pytest.mark.slow
def test_dp_split_lora_over_ray_actors_matches_inprocess(ray_local, llama):
    """The DP client built inside its Ray actor trains as in-process (seeded noise: the same draws)."""
    from simulations.data.source import ConfigDataSource
    from vfl.runtime.transport.ray_transport import RayTransport

    raw = {"name": "dp-ray", "strategy": "split-lora", "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
           "data": {"train_subsample": 32, "test_subsample": 16},
           "train": {"epochs": 1, "batch_size": 16, "optimizer": "sgd", "lr": 0.1},
           "privacy": {"bottom_dp": DP, "noise_rng": "seeded"},
           "params": {"max_len": 16, "leak_window": 16, "lora_rank": 2, "model_dir": llama}}
    cfg = load_run_config({**raw, "transport": {"kind": "ray", "cpus_per_actor": 0.1}})
    engine = Engine(cfg, RayTransport(), ConfigDataSource.from_config(cfg), progress=False)
    try:
        res = engine.run()
    finally:
        engine.transport.shutdown()
    ref = Engine(load_run_config(raw), InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False).run()
    assert res.summary["transport"] == "ray" and res.summary["epsilon_scope"] == SCOPE_LLM_DPSGD
    assert res.summary["epsilon"] == ref.summary["epsilon"]
    for key in ("payload_bytes_up", "payload_bytes_down", "messages_up", "messages_down"):
        assert res.summary[key] == ref.summary[key], key
    assert res.history[0]["train_loss"] == pytest.approx(ref.history[0]["train_loss"], rel=1e-4)
