"""The parameters every split-LLM strategy shares, declared once: the model (``ModelParams``) and its
LoRA adapters (``LoraParams``). ``sap``, ``ushape-lora``/``ushape-p3eft`` and the P3EFT family
(``strategies/base/split_llm.py``) extend them; a strategy whose key means something narrower
redeclares that field with its own help (its place in ``config-help`` stays)."""

from __future__ import annotations

from dataclasses import dataclass

from vfl.config.fields import param


@dataclass(frozen=True)
class ModelParams:
    model_dir: str | None = param(None, help="local Hugging Face model directory: BERT-like encoder, GPT-2 or "
                                  "rotary model (Llama, Mistral, Qwen2/3, Phi-3, Gemma2/3, Granite, GPT-NeoX, EuroBERT; default: "
                                  "packaged MiniLM); a hub id must be in the local cache")
    allow_download: bool = param(False, help="let a hub id in model_dir download (also needs HF_HUB_OFFLINE=0)")
    dtype: str = param("fp32", choices=("fp32", "bf16", "fp16"), help="dtype of the frozen pretrained weights "
                       "(LoRA, head and every gradient stay float32; a bf16 checkpoint loads in this dtype)")
    max_len: int = param(64, ge=4, le=131072, help="tokens per text or sentence pair (truncation); at most "
                         "the model's positions (config.max_position_embeddings, checked at prepare)")


@dataclass(frozen=True)
class LoraParams(ModelParams):
    lora_rank: int = param(8, ge=1, le=1024, help="LoRA rank r of the adapters")
    lora_alpha: float = param(16.0, gt=0, help="LoRA scaling numerator (scale = alpha / rank)")
    lora_targets: tuple[str, ...] = param((), help="module names that get LoRA adapters; empty = the model's "
                                          "defaults (the attention query/value projections, fused qkv_proj on "
                                          "Phi-3); [all-linear] = every linear layer in the blocks")
