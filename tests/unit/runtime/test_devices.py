"""``train.device: auto|cpu|cuda|cuda:N`` and ``transport.gpus_per_actor``: validated at config time,
resolved inside each host, reserved per actor with Ray."""

from __future__ import annotations

import pytest
import torch

import strategies  # noqa: F401  (registers the strategies)
from vfl.core.errors import ConfigError
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.runtime.devices import resolve_device, with_resolved_device
from vfl.runtime.preflight import check_device
from vfl.runtime.transport.placement import place

BASE = {"strategy": "npq", "dataset": "digits", "num_parties": 3}


def _cfg(**sections):
    return load_run_config({**BASE, **sections})


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:3"])
def test_device_names_accepted(device):
    assert _cfg(train={"device": device}).train.device == device


@pytest.mark.parametrize("device", ["gpu", "cuda:", "cuda:-1", "cuda:x", "CPU", "mps"])
def test_bad_device_names_are_named(device):
    with pytest.raises(ConfigError, match="allowed: auto, cpu, cuda, cuda:N") as err:
        _cfg(train={"device": device})
    assert err.value.key == "train.device"


def test_cuda_over_ray_needs_gpus_reserved_per_actor():
    with pytest.raises(ConfigError, match="transport.gpus_per_actor.*sees only the GPUs Ray reserved"):
        _cfg(train={"device": "cuda"}, transport={"kind": "ray"})
    cfg = _cfg(train={"device": "cuda:0"}, transport={"kind": "ray", "gpus_per_actor": 0.5})
    groups = place(STRATEGIES.get("npq")(cfg).layout(), cfg.transport)
    assert groups and all(g.num_gpus == 0.5 for g in groups)
    with pytest.raises(ConfigError, match="transport.gpus_per_actor"):
        _cfg(transport={"gpus_per_actor": -1})


def test_auto_resolves_to_what_this_process_sees():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto") == expected and resolve_device("cuda:1") == "cuda:1"
    cfg = _cfg(train={"device": "auto"})
    assert with_resolved_device(cfg).train.device == expected and cfg.train.device == "auto"
    assert with_resolved_device(_cfg()) == _cfg()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_a_cuda_index_without_cuda_is_one_clear_error():
    check_device("auto")
    with pytest.raises(ConfigError, match="'cuda:3' but this machine .* has no CUDA device.*'auto'"):
        check_device("cuda:3")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_index_past_the_visible_gpus_is_named():
    check_device("cuda:0")
    with pytest.raises(ConfigError, match="sees .* CUDA device"):
        check_device(f"cuda:{torch.cuda.device_count()}")
