"""``params.quantization: none | nf4``: the model servers' frozen weights in 4-bit NormalFloat (QLoRA,
Dettmers et al. 2023) through bitsandbytes, which needs a CUDA device.

``check_quantization`` refuses, in one line naming the key, a run that asks for nf4 where it cannot
load (bitsandbytes missing, no CUDA device, or ``train.device`` not a GPU); ``quantization_config``
builds transformers' ``BitsAndBytesConfig`` (NF4, double quantization, compute dtype from
``params.dtype``); ``prepare_quantized`` applies peft's ``prepare_model_for_kbit_training`` without
its gradient checkpointing (``params.gradient_checkpointing`` is the project's own, eval-mode one).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from vfl.core.errors import ConfigError

QUANTIZATIONS = ("none", "nf4")
KEY = "params.quantization"


def check_quantization(quantization: str, *, device: str, machine: bool = True) -> None:
    """ConfigError (one line) unless ``quantization`` can load here: nf4 needs ``train.device`` cuda or
    auto and, with ``machine`` (checks of this process's machine), bitsandbytes and a CUDA device."""
    if quantization == "none":
        return
    if quantization not in QUANTIZATIONS:
        raise ConfigError(KEY, f"got {quantization!r}; allowed: {', '.join(QUANTIZATIONS)}")
    if not (device == "auto" or device.startswith("cuda")):
        raise ConfigError(KEY, f"got {quantization!r} with train.device={device!r}: bitsandbytes' 4-bit kernels "
                          "run on CUDA only; set train.device=cuda or params.quantization=none")
    if not machine:
        return
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ConfigError(KEY, f"got {quantization!r} but bitsandbytes is not installed here (import bitsandbytes "
                          "fails); pip install bitsandbytes (CUDA machines) or set params.quantization=none")
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(KEY, f"got {quantization!r} but this machine has no CUDA device "
                          "(torch.cuda.is_available() is False); bitsandbytes' 4-bit kernels need one: run on a GPU "
                          "or set params.quantization=none")


def quantization_config(quantization: str, *, dtype: Any) -> Any:
    """transformers' ``BitsAndBytesConfig`` for ``quantization`` (None for ``none``): NF4 weights with
    double quantization, matmuls in ``dtype`` (the torch dtype of ``params.dtype``)."""
    if quantization == "none":
        return None
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=dtype)


def prepare_quantized(model: Any) -> Any:
    """peft's QLoRA preparation (norms and other non-quantized weights in float32, everything frozen),
    without its gradient checkpointing."""
    from peft import prepare_model_for_kbit_training

    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)


def quantized_linears(model: Any) -> list[Any]:
    """bitsandbytes' 4-bit linear layers of ``model`` (their ``compute_dtype`` is the matmul dtype)."""
    return [m for m in model.modules()
            if type(getattr(m, "weight", None)).__name__ == "Params4bit" and "compute_dtype" in vars(m)]
