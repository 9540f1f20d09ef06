"""``params.quantization: nf4`` (QLoRA loading, ``parties/llm/common/quantization.py``) is refused in one
line naming the key where it cannot load: no bitsandbytes, no CUDA device, or a CPU ``train.device``."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from parties.llm.common.quantization import check_quantization, quantization_config
from simulations.cli.runner import execute, resolve_config
from vfl.core.errors import ConfigError

HAS_BNB = importlib.util.find_spec("bitsandbytes") is not None


def _raw(device: str, quantization: str = "nf4") -> dict:
    return {"name": "nf4", "strategy": "p3eft", "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
            "data": {"train_subsample": 32, "test_subsample": 16},
            "train": {"epochs": 1, "batch_size": 16, "device": device},
            "params": {"max_len": 16, "lora_rank": 2, "quantization": quantization}}


def _one_line(err: pytest.ExceptionInfo[ConfigError]) -> str:
    assert err.value.key == "params.quantization" and "\n" not in str(err.value)
    return str(err.value)


def test_a_cpu_device_is_refused_at_config_time():
    with pytest.raises(ConfigError) as err:
        resolve_config(_raw("cpu"))
    assert "train.device='cpu'" in _one_line(err) and "params.quantization=none" in str(err.value)


def test_an_unknown_quantization_is_refused():
    with pytest.raises(ConfigError, match="params.quantization"):
        resolve_config(_raw("auto", "int3"))


@pytest.mark.skipif(HAS_BNB, reason="bitsandbytes is installed here")
def test_nf4_without_bitsandbytes_is_refused_before_the_run_starts(tmp_path):
    """``auto`` passes the config-time check; the preflight (strategy prepare) finds no bitsandbytes."""
    cfg = resolve_config(_raw("auto"))
    with pytest.raises(ConfigError) as err:
        execute(cfg, out_dir=tmp_path / "run", progress=False)
    assert "bitsandbytes is not installed" in _one_line(err) and "pip install bitsandbytes" in str(err.value)
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())  # nothing written
    with pytest.raises(ConfigError, match="bitsandbytes is not installed"):  # the server's own load checks too
        from parties.llm.common.backbone import load_encoder

        load_encoder(None, quantization="nf4", device="cuda")


def test_nf4_without_cuda_is_refused(monkeypatch):
    """bitsandbytes present (as the import system reports it) but no CUDA device."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "bitsandbytes"
                        else real(name, *a))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError) as err:
        check_quantization("nf4", device="cuda")
    assert "no CUDA device" in _one_line(err)
    check_quantization("nf4", device="cuda", machine=False)  # config time: the machine is not checked
    check_quantization("none", device="cpu")


def test_nf4_config_is_4bit_normalfloat_with_the_params_dtype():
    cfg = quantization_config("nf4", dtype=torch.bfloat16)
    assert cfg.load_in_4bit and cfg.bnb_4bit_quant_type == "nf4" and cfg.bnb_4bit_compute_dtype == torch.bfloat16
    assert quantization_config("none", dtype=torch.float32) is None
