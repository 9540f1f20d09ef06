"""cae/dcae: the autoencoder confuses and decodes every class, the server trains on the soft labels and
decodes its predictions, DiscreteSGD rounds to its levels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import strategies  # noqa: F401
from parties.defenses.cae import CAE, discretize, entropy, train_autoencoder
from simulations.cli.main import main
from tests.support.defense_server import defended_server, forward_messages
from vfl.core.errors import ConfigError
from vfl.engine.schema import load_run_config
from vfl.runtime import message as wire


@pytest.mark.parametrize("k", [2, 10])
def test_every_class_is_confused_and_decoded_back(k):
    enc, dec = train_autoencoder(k, lam=0.01, alpha=2.0)
    soft = torch.softmax(enc(torch.eye(k)), dim=1)
    assert (soft.argmax(1) != torch.arange(k)).all()  # the confused label's top class is never the true one
    assert float(soft.diagonal().max()) < 0.2
    assert (dec(soft).argmax(1) == torch.arange(k)).all()  # the label holder decodes it exactly


def test_entropy_of_the_confused_labels_grows_with_lambda():
    h = [float(entropy(torch.softmax(train_autoencoder(10, lam=lam, alpha=2.0)[0](torch.eye(10)), 1)).mean())
         for lam in (0.0, 0.01, 0.1)]
    assert h[0] < h[1] < h[2] <= np.log(10)


def test_the_autoencoder_sees_no_data_and_is_the_same_every_time():
    a, b = train_autoencoder(5, lam=0.01, alpha=2.0), train_autoencoder(5, lam=0.01, alpha=2.0)
    pairs = list(zip(a[0].parameters(), b[0].parameters(), strict=True))
    assert pairs  # the encoder has parameters to compare
    for x, y in pairs:
        assert torch.equal(x, y)  # a restart rebuilds the same confusion (nothing to checkpoint)


@pytest.mark.parametrize("bins", [2, 3, 6])
def test_discretize_rounds_to_the_nearest_of_bins_levels(bins):
    g = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32)
    out = discretize(g, bins=bins)
    r = np.abs(g).max()
    levels = np.linspace(-r, r, bins)
    assert len(np.unique(out)) <= bins
    nearest = levels[np.abs(g[..., None] - levels).argmin(-1)]
    assert np.allclose(out, nearest, atol=1e-5)




def test_the_server_trains_on_the_confused_soft_labels_and_sends_their_gradient():
    server = defended_server([{"kind": "cae"}])
    (cae,) = [d for d in server.defenses if isinstance(d, CAE)]
    head0 = [p.detach().clone() for p in server.head.parameters()]
    fused = server.aggregate(sorted(forward_messages(), key=lambda m: int(m.metadata.src_node_id))).requires_grad_(True)
    y = torch.as_tensor(server.labels.y_train[server.schedule.train_ids(0, 0)])
    soft = cae.soft_targets(y, num_classes=10)
    logits = server.head(fused)
    (want,) = torch.autograd.grad(nn.functional.cross_entropy(logits, soft), fused)  # by hand, on soft labels
    (plain,) = torch.autograd.grad(nn.functional.cross_entropy(server.head(fused), y), fused)  # control: true labels
    for p, p0 in zip(server.head.parameters(), head0, strict=True):
        assert torch.equal(p, p0)
    out = server.train_step(forward_messages(), 0, 0)
    got = [wire.from_array(a) for m in out for a in m.content.array_records["grad"].values()][0]
    assert np.allclose(got, want.numpy(), atol=1e-6) and not np.allclose(got, plain.numpy(), atol=1e-4)


def test_predictions_are_decoded_and_dcae_discretizes_what_leaves():
    server = defended_server([{"kind": "dcae", "bins": 4}])
    out = server.train_step(forward_messages(), 0, 0)
    got = [wire.from_array(a) for m in out for a in m.content.array_records["grad"].values()][0]
    assert len(np.unique(got)) <= 4
    (cae,) = server.defenses
    enc, _ = cae.autoencoder(10)
    confused = torch.softmax(enc(torch.eye(10)), 1)  # a head that outputs exactly the confused label of class c
    probs = server.server_labels.decode(torch.log(confused))
    assert (probs.argmax(1) == torch.arange(10)).all() and (confused.argmax(1) != torch.arange(10)).all()


def test_refusals_and_config_help():
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: cae is not available here: list one of cae, dcae"):
        load_run_config({"strategy": "npq", "defenses": [{"kind": "cae"}, {"kind": "dcae"}]})
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: cae is not available here: marvell reads"):
        load_run_config({"strategy": "npq", "defenses": [{"kind": "cae"}, {"kind": "marvell"}]})
    for strategy in ("pbm", "ldp", "npq+secagg"):
        cfg = load_run_config({"strategy": strategy, "defenses": [{"kind": "label_rr"}, {"kind": "dcae"}]})
        assert cfg.defenses[1] == {"kind": "dcae", "lam": 0.01, "alpha": 2.0, "bins": 6}


def test_cli_lists_the_new_defenses_and_their_keys(capsys):
    assert main(["defenses"]) == 0
    out = capsys.readouterr().out
    for name in ("label_rr_prior", "label_gp", "mid", "cae", "dcae"):
        assert any(line.split()[:1] == [name] for line in out.splitlines()), name
    assert main(["config-help"]) == 0
    out = capsys.readouterr().out
    for key in ("label_rr_prior].epsilon", "label_rr_prior].stage_epoch", "label_gp].noise_multiplier",
                "label_gp].max_norm", "mid].lam", "mid].bottleneck", "cae].lam", "dcae].bins"):
        assert f"defenses[kind={key}" in out, key
