"""P3EFT §3.3's θ-difference attack, played by a model server with what it keeps (successive adapter
states, the inputs, its own model): it inverts the client's optimizer to g_θ and solves Jᵀ g_h = g_θ
by least squares. Control: on today's p3eft (m = 2 pieces, mixing, regularizer) it recovers g_h and
the labels while the piece/activation metrics read near chance; with ``params.theta_noise`` (fresh
noise on the adapters sent) it reads chance. Rotation (``params.rotate_servers``) keeps every server
off consecutive steps, which is all the paper asks, and is measured NOT to be enough (θ_t vs θ_{t+2})."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from parties.llm.common.arch import arch_of
from parties.llm.common.backbone import load_encoder, load_tokenizer
from parties.llm.common.lora import lora_spec_for
from parties.llm.common.tiny import SENTENCES
from parties.llm.p3eft.adapters import LoraEncoder, init_adapters
from parties.llm.p3eft.curious import _flat, recover_cotangent
from vfl.attacks.leakage import spectral_auc
from vfl.attacks.theta_difference import cosine, optimizer_gradient
from vfl.core.errors import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = " ".join(SENTENCES).replace(",", "").split()
    return [" ".join(rng.choice(words, size=int(rng.integers(4, 12)))) for _ in range(n)]


def test_optimizer_gradient_inverts_torch_sgd_momentum_and_weight_decay():
    p = torch.nn.Parameter(torch.randn(50, dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=0.05, momentum=0.9, weight_decay=0.01)
    states, grads = [p.detach().clone()], [torch.randn(50, dtype=torch.float64) for _ in range(3)]
    for g in grads:
        p.grad = g.clone()
        opt.step()
        states.append(p.detach().clone())
    prev = torch.zeros(50, dtype=torch.float64)  # step 0: torch starts the buffer at the first gradient
    for t, g in enumerate(grads):
        est, prev = optimizer_gradient(states[t], states[t + 1], optimizer="sgd", lr=0.05, momentum=0.9,
                                       weight_decay=0.01, prev_buf=prev)
        torch.testing.assert_close(est, g)
    with pytest.raises(ConfigError, match="train.optimizer"):
        optimizer_gradient(states[0], states[1], optimizer="lion", lr=0.1)


def test_least_squares_recovers_g_h_and_labels_from_one_sgd_step(llama):
    """The server's own Jacobian at (x_t, θ_t) and θ_{t+1} − θ_t give back g_h (cosine) and the labels."""
    model = load_encoder(llama)
    enc = LoraEncoder(model, lora_spec_for(arch_of(model), rank=4, alpha=16.0), pooling="last")
    batch = load_tokenizer(llama)(_texts(16), padding=True, return_tensors="pt")
    ids, lengths = batch["input_ids"], batch["attention_mask"].sum(1)
    gen = torch.Generator().manual_seed(0)
    adapter = {k: v if ".lora_A." in k else 0.1 * torch.randn(v.shape, generator=gen)
               for k, v in init_adapters(enc.shapes, generator=gen).items()}
    y = torch.arange(16) % 2
    w = torch.randn(32, generator=gen)
    g_h = (0.2 + 0.5 * torch.rand(16, 1, generator=gen)) * (2.0 * y - 1).unsqueeze(1) * w / 16
    names = list(enc.slots)
    theta = _flat(adapter, names)
    nxt = theta - 0.01 * _flat(enc.backprop(ids, lengths, adapter, g_h), names)  # the client's SGD step
    g_theta, _ = optimizer_gradient(theta, nxt, optimizer="sgd", lr=0.01)
    rec = recover_cotangent(enc, ids, lengths, adapter, g_theta, iters=200)
    assert cosine(rec, g_h) > 0.9
    assert spectral_auc(rec.numpy(), y.numpy()) == 1.0
    noisy = nxt + 1e-2 * torch.randn(nxt.shape, generator=gen, dtype=nxt.dtype)  # theta_noise's effect
    g_noisy, _ = optimizer_gradient(theta, noisy, optimizer="sgd", lr=0.01)
    assert cosine(recover_cotangent(enc, ids, lengths, adapter, g_noisy, iters=200), g_h) < 0.3


@pytest.mark.parametrize(("params", "key"), [({"rotate_servers": True}, "params.rotate_servers"),
                                             ({"servers": 1, "m": 0, "rotate_servers": True}, "params.rotate_servers"),
                                             ({"theta_noise": -1.0}, "params.theta_noise")])
def test_mitigation_keys_are_validated(params, key):
    from strategies.p3eft import P3eft
    from vfl.engine.schema import load_run_config

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        cfg = load_run_config({"name": "v", "strategy": "p3eft", "num_parties": 1, "params": params})
        P3eft.validate_config(cfg)


def test_curious_keeps_a_bounded_window_around_its_targets():
    """With the schedule's steps per epoch the server keeps ≤ 5 states per target and attacks one pair of
    successive states (≤ 2 steps apart) per target, also when it sees every other step (rotation)."""
    from parties.llm.p3eft.curious import Curious, OptimizerGuess

    for stride in (1, 2):
        c = Curious(OptimizerGuess("sgd", 0.1), steps=3, steps_per_epoch=50)
        for step in range(0, 50, stride):
            c.note(epoch=0, step=step, adapter=0, ids=torch.zeros(2, 3, dtype=torch.long),
                   lengths=torch.ones(2, dtype=torch.long), tensors={"a": torch.full((2,), float(step))})
        kept = sorted(c.seen[0])
        assert len(kept) <= 5 * 3 and c._targets() == [0, 23, 46]
        starts = [kept[i][1] for i in c._pairs(kept)]
        assert starts == ([0, 23, 46] if stride == 1 else [0, 24, 46])


def test_leak_report_scores_sign_free_rows_with_the_sign_invariant_attack_and_the_probe():
    """A server's m = B-like stream (one direction per class, secret sign per row, K = 3) in the leak
    report: ``leak_sign`` reads the labels, the probe is reported beside ``leak``; a missing source
    (head-only servers run no θ attack) is skipped."""
    from strategies.base.llm_leak import LeakTracker
    from vfl.data.sampling import Schedule

    rng = np.random.default_rng(0)
    y = np.arange(192) % 3
    sched = Schedule(seed=0, num_train=192, num_test=8, batch_size=16, eval_batch_size=16)
    tracker = LeakTracker(y_train=y, schedule=sched, window=192, seed=0)
    dirs = rng.normal(size=(3, 16))
    keys = np.array([(0, s, 0, r) for s in range(12) for r in range(16)], dtype=np.int64)
    labels = y[tracker.sample_ids(keys)]
    rows = dirs[labels] * rng.choice([-1.0, 1.0], size=(len(keys), 1)) + 0.05 * rng.normal(size=(len(keys), 16))
    log = {"grad_rows": rows, "grad_keys": keys, "act_rows": rng.normal(size=(len(keys), 16)), "act_keys": keys}
    tracker.observe(server=0, log=lambda name: log[name])
    out = tracker.epoch_summary()
    assert out["leak_sign"] > 0.95 and out["leak_grad"] >= out["leak_sign"]
    assert np.isnan(out["leak_theta"]) and 0.0 <= out["leak_probe"] <= 1.0
    assert out["leak"] == max(out["leak_act"], out["leak_grad"])
