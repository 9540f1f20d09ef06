"""privacy.bottom_dp on split LLMs (split-lora, p3eft, head-only): the tests through in-process engine runs."""

from __future__ import annotations

import math

import pytest
import torch

import strategies  # noqa: F401
from parties.llm.p3eft.dp_sgd import (
    DpLlmClient,
)
from parties.llm.p3eft.server import ModelServer
from tests.engine.llm.test_sap_nodes import ToySentiment
from tests.unit.llm.test_llm_dp import DP  # noqa: F401
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.privacy.accounting.accountant import Accountant
from vfl.privacy.accounting.events import LoraDPSGDEvent
from vfl.privacy.accounting.noise_report import DPSGD_CAVEAT
from vfl.privacy.accounting.scope import SCOPE_LLM_DPSGD
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _run(cfg):
    transport = InProcessTransport()
    result = Engine(cfg, transport, ToySentiment(num_train=24, num_test=8), progress=False).run()
    found = [n for h in transport.hosts.values() for n in h.nodes.values()]
    return result.summary, next(n for n in found if not isinstance(n, ModelServer))


# ---- real runs ---------------------------------------------------------------------------------
def _config(strategy: str, model_dir: str, noise_rng: str = "crypto", epochs: int = 1, budget: float | None = None,
            **extra):
    params = {"max_len": 16, "leak_window": 16, "model_dir": model_dir,
              **({} if strategy == "head-only" else {"lora_rank": 2}), **extra}
    return load_run_config({"strategy": strategy, "num_parties": 1, "seed": 3,
                            "train": {"epochs": epochs, "batch_size": 8, "optimizer": "sgd", "lr": 0.5},
                            "privacy": {"bottom_dp": DP, "noise_rng": noise_rng, "epsilon_budget": budget},
                            "params": params})


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


# ---- the attack it mitigates -------------------------------------------------------------------
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


def test_noise_replays_only_when_seeded(llama):
    adapters = {}
    for run, mode in (("s1", "seeded"), ("s2", "seeded"), ("c1", "crypto")):
        adapters[run] = _run(_config("split-lora", llama, noise_rng=mode))[1].adapters[0]
    for k, v in adapters["s1"].items():
        torch.testing.assert_close(adapters["s2"][k], v)
    assert any(not torch.equal(adapters["c1"][k], v) for k, v in adapters["s1"].items() if ".lora_B." in k)


def test_epsilon_budget_stops_before_the_epoch_that_would_pass_it(llama):
    one, two = (Accountant(), Accountant())
    one.record(LoraDPSGDEvent(count=1, **DP))
    two.record(LoraDPSGDEvent(count=2, **DP))
    budget = (one.epsilon(1e-5)[0] + two.epsilon(1e-5)[0]) / 2
    summary, _ = _run(_config("split-lora", llama, epochs=3, budget=budget))
    assert summary["epochs"] == 1 and summary["stopped"]["before_epoch"] == 1
    assert summary["epsilon"] == pytest.approx(one.epsilon(1e-5)[0], rel=1e-12) and summary["epsilon"] <= budget
