"""mid: the bottleneck's KL and reparameterised sample, and the server's loss = CE + lambda * KL."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import strategies  # noqa: F401
from parties.defenses.mid import Bottleneck, MIDHead, kl_standard_normal
from tests.support.defense_server import M, defended_server, forward_messages
from vfl.core.errors import ConfigError
from vfl.core.rng import NodeNoise, NoiseSource
from vfl.engine.schema import load_run_config


def test_kl_matches_the_closed_form_of_torch_distributions():
    g = torch.Generator().manual_seed(0)
    mu, std = torch.randn(5, 3, generator=g), torch.rand(5, 3, generator=g) + 0.1
    ref = torch.distributions.kl_divergence(torch.distributions.Normal(mu, std), torch.distributions.Normal(0.0, 1.0))
    assert torch.allclose(kl_standard_normal(mu, std), ref.sum(1), atol=1e-6)
    assert float(kl_standard_normal(torch.zeros(1, 4), torch.ones(1, 4))) == 0.0


def test_the_sample_is_mu_plus_sigma_times_the_servers_noise():
    torch.manual_seed(0)
    layer = Bottleneck(6, bottleneck=4, hidden=8)
    x = torch.randn(1, 6).expand(20_000, 6)
    mu, s = layer.enc(x[:1]).chunk(2, dim=1)
    std = nn.functional.softplus(s - 5.0)
    layer.dec = nn.Identity()  # read z itself
    z, _ = layer(x, NoiseSource.fresh().normal((20_000, 4)))
    n = len(z)
    assert torch.allclose(z.mean(0), mu[0], atol=float(5 * std.max().detach() / math.sqrt(n)))
    assert torch.allclose(z.std(0), std[0], rtol=5 * math.sqrt(2 / n))
    mean, _ = layer(x[:3], None)  # evaluation: the mean, no noise
    assert torch.allclose(mean, mu.expand(3, 4))


def test_one_bottleneck_per_party_block_and_refuses_unarmed_training():
    head = MIDHead(nn.Linear(12, 3), in_dim=12, parts=3, lam=0.5, bottleneck=2, hidden=4)
    assert len(head.layers) == 3
    with pytest.raises(RuntimeError, match="arm"):
        head(torch.randn(2, 12))
    head.arm(NoiseSource.fresh())
    head(torch.randn(2, 12))
    penalty = head.penalty
    assert penalty is not None and float(penalty) > 0 and head.penalty is None  # handed out once
    head.eval()
    head(torch.randn(2, 12))
    assert head.penalty is None




@pytest.mark.parametrize(("fusion", "parts"), [("concat", M), ("sum", 1)])
def test_the_server_trains_head_and_bottleneck_on_ce_plus_lambda_kl(fusion, parts):
    server = defended_server([{"kind": "mid", "lam": 0.5}], model={"fusion": fusion}, seeded=True)
    assert isinstance(server.head, MIDHead) and len(server.head.layers) == parts
    trained = {id(p) for g in server.optimizer.param_groups for p in g["params"]}
    assert all(id(p) in trained for p in server.head.parameters())  # the bottleneck is trained too
    twin = defended_server([{"kind": "mid", "lam": 0.5}], model={"fusion": fusion}, seeded=True)  # seeded: same weights, same noise
    fused = twin.aggregate(sorted(forward_messages(), key=lambda m: int(m.metadata.src_node_id)))
    y = torch.as_tensor(twin.labels.y_train[twin.schedule.train_ids(0, 0)])
    twin.head.train()
    twin.head.arm(NodeNoise("seeded", seed=twin.schedule.seed, node=0).round("head", phase="train", epoch=0, step=0))
    logits = twin.head(fused)
    penalty = float(twin.head.penalty)
    ce = float(nn.functional.cross_entropy(logits, y))
    server.train_step(forward_messages(), 0, 0)
    loss = server.train_stats["loss"] / server.train_stats["count"]
    assert loss == pytest.approx(ce + penalty, rel=1e-5) and penalty > 1e-3


def test_mid_refusals_and_composition():
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: mid is not available here: .*local_steps: 1$"):
        load_run_config({"strategy": "npq", "train": {"local_steps": 2}, "defenses": [{"kind": "mid"}]})
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: label_gp is not available here: mid reshapes"):
        load_run_config({"strategy": "npq", "defenses": [{"kind": "label_gp"}, {"kind": "mid"}]})
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: mid acts on the label holder's head, which strategy "
                                          r"'p3eft' does not expose"):
        load_run_config({"strategy": "p3eft", "num_parties": 1, "dataset": "sst2-tiny", "defenses": [{"kind": "mid"}]})
    for strategy in ("pbm", "ldp", "npq+secagg"):
        assert load_run_config({"strategy": strategy, "defenses": [{"kind": "mid"}]}).defenses[0]["lam"] == 0.1


def test_the_trained_head_holds_no_noise_source_and_can_be_copied():
    """The report deep-copies the server's head (gradient_inversion); a NoiseSource refuses to be copied."""
    import copy

    head = MIDHead(nn.Linear(4, 2), in_dim=4, parts=1, lam=0.1, bottleneck=2, hidden=0)
    head.arm(NoiseSource.fresh())
    with pytest.raises(TypeError, match="must not be pickled"):  # control: an armed head
        copy.deepcopy(head)
    head(torch.randn(3, 4))
    assert head.penalty is not None  # what the server adds to its loss
    assert head.noise is None and isinstance(copy.deepcopy(head), MIDHead)
