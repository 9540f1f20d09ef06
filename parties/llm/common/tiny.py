"""Tiny random language models of every supported family, built from a config offline (``vfl tiny-lm``).

A model here is a few hidden units wide (32) and 3 blocks deep, its weights random (seeded) and
perturbed so that every weight matters (random-init norms are all ones and biases zero), saved with
``save_pretrained`` together with a byte-level BPE tokenizer (GPT-2's scheme, trained by the
``tokenizers`` library on a few fixed sentences; one special token ``<|endoftext|>``, no pad token:
the loader pads with it). Byte-level: every text encodes. Nothing is downloaded. What such a model
is for: running the split-LLM strategies end to end (and their start-up self-check) on any family in
seconds, on a CPU; its accuracy is chance.

The configs exercise what makes a family differ: sliding windows shorter than short texts (Mistral,
Qwen2, Gemma2/3, ModernBERT), Gemma 3's per-layer-type rotary tables, Granite's multipliers, OPT's and
ELECTRA's embedding width unlike the hidden size, DeBERTa-v2's relative attention and convolution,
EuroBERT's bidirectional rotary encoder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vfl.core.errors import ConfigError

SENTENCES = [
    "a gripping, beautifully acted film that rewards patience",
    "the plot is thin and the jokes fall flat",
    "an unexpectedly moving story about friendship and loss",
    "tedious, overlong and painfully predictable",
    "one of the best movies of the year, sharp and funny",
    "the characters are dull and the dialogue is worse",
]
EOT = "<|endoftext|>"

_DEC = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=64)
_ENC = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
# family -> (transformers config class, its arguments besides the vocabulary and the special token ids)
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", _DEC),
    "mistral": ("MistralConfig", {**_DEC, "sliding_window": 4}),
    "qwen2": ("Qwen2Config", {**_DEC, "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}),
    "qwen3": ("Qwen3Config", {**_DEC, "head_dim": 8}),
    "phi3": ("Phi3Config", {**_DEC, "pad_token_id": 0}),
    "gemma2": ("Gemma2Config", {**_DEC, "head_dim": 8, "sliding_window": 4}),
    "gemma3": ("Gemma3TextConfig", {**_DEC, "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": 4,
                                    "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}),
    "granite": ("GraniteConfig", {**_DEC, "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                                  "attention_multiplier": 0.015625, "logits_scaling": 8.0}),  # Granite 3.0's values
    "gpt_neox": ("GPTNeoXConfig", dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                       num_attention_heads=4, max_position_embeddings=64)),
    "gpt2": ("GPT2Config", dict(n_embd=32, n_layer=3, n_head=4, n_positions=64)),
    "opt": ("OPTConfig", dict(hidden_size=32, ffn_dim=64, num_hidden_layers=3, num_attention_heads=4,
                              max_position_embeddings=64, word_embed_proj_dim=16)),  # project_in / project_out
    "bert": ("BertConfig", _ENC),
    "roberta": ("RobertaConfig", {**_ENC, "max_position_embeddings": 66, "pad_token_id": 0}),  # positions after pad
    "distilbert": ("DistilBertConfig", dict(dim=32, hidden_dim=64, n_layers=3, n_heads=4, max_position_embeddings=64)),
    "electra": ("ElectraConfig", {**_ENC, "embedding_size": 16}),  # embeddings_project
    "mpnet": ("MPNetConfig", {**_ENC, "max_position_embeddings": 66}),
    "deberta_v2": ("DebertaV2Config", {**_ENC, "relative_attention": True, "position_buckets": 8,
                                       "norm_rel_ebd": "layer_norm", "conv_kernel_size": 3,
                                       "pos_att_type": ["p2c", "c2p"], "share_att_key": True,
                                       "position_biased_input": False}),
    "modernbert": ("ModernBertConfig", dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                            num_attention_heads=4, max_position_embeddings=64, local_attention=4,
                                            global_attn_every_n_layers=2, pad_token_id=0, cls_token_id=0,
                                            sep_token_id=0)),  # local (sliding) layers with a window of 4
    "eurobert": ("EuroBertConfig", {**_DEC, "head_dim": 8, "pad_token_id": 0, "mask_token_id": 0}),
    "t5": ("T5Config", dict(d_model=32, d_kv=8, d_ff=64, num_layers=3, num_heads=4, relative_attention_num_buckets=8,
                            decoder_start_token_id=0)),  # saved whole; the split-LLM code loads its encoder
}
ENCODERS = ("bert", "roberta", "distilbert", "electra", "mpnet", "deberta_v2", "modernbert", "eurobert", "t5")
_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # params.dtype names (torch names also taken)


def byte_tokenizer(vocab_size: int = 400) -> Any:
    """The byte-level BPE tokenizer every tiny model shares (``vocab_size`` at most, trained on ``SENTENCES``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(SENTENCES * 4, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOT, bos_token=EOT, unk_token=EOT)


def _torch_dtype(dtype: str) -> Any:
    import torch

    name = _DTYPES.get(dtype, dtype)
    if name not in _DTYPES.values():
        raise ConfigError("--dtype", f"got {dtype!r}; allowed: {', '.join(_DTYPES)}")
    return getattr(torch, name)


def tiny_lm_dir(root: Path | str, family: str, *, dtype: str = "fp32", vocab_size: int = 400) -> str:
    """Save a random-init base model of ``family`` (a key of ``FAMILIES``) in ``dtype`` (fp32, bf16, fp16)
    with the shared byte-level tokenizer under ``root``; returns the path. Seeded: the same files every time."""
    import torch
    import transformers
    from transformers import AutoModel

    if family not in FAMILIES:
        raise ConfigError("FAMILY", f"got {family!r}; allowed: {', '.join(sorted(FAMILIES))}")
    torch_dtype = _torch_dtype(dtype)
    tok = byte_tokenizer(vocab_size)
    eot = tok.convert_tokens_to_ids(EOT)
    name, kw = FAMILIES[family]
    cfg = getattr(transformers, name)(vocab_size=len(tok), bos_token_id=eot, eos_token_id=eot, **kw)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModel.from_config(cfg)
        with torch.no_grad():  # random-init norms are all ones and biases zero: perturb so every weight matters
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
    model.to(torch_dtype).save_pretrained(root)
    tok.save_pretrained(root)
    return str(root)


def tiny_gpt2_dir(root: Path | str, *, vocab_size: int = 400, n_layer: int = 2) -> str:
    """Save a random-init ``GPT2Model`` (2 blocks, 2 heads, width 32, not perturbed) and the byte-level
    tokenizer under ``root``; returns the path."""
    import torch
    from transformers import GPT2Config, GPT2Model

    tok = byte_tokenizer(vocab_size)
    eot = tok.convert_tokens_to_ids(EOT)
    cfg = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=n_layer, n_head=2,
                     bos_token_id=eot, eos_token_id=eot)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT2Model(cfg)
    model.save_pretrained(root)
    tok.save_pretrained(root)
    return str(root)
