"""A tiny GPT-2 saved as a local Hugging Face directory, built without any download.

The model: ``GPT2Config(n_layer=2, n_head=2, n_embd=32)`` with random weights (seeded). The tokenizer: a
byte-level BPE (GPT-2's scheme) trained by the ``tokenizers`` library on a few fixed sentences and
wrapped in ``PreTrainedTokenizerFast`` with GPT-2's single special token ``<|endoftext|>`` and, like
GPT-2, no pad token (the loader pads with end-of-text). Byte-level: every text encodes, whatever
the training sentences were.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SENTENCES = [
    "a gripping, beautifully acted film that rewards patience",
    "the plot is thin and the jokes fall flat",
    "an unexpectedly moving story about friendship and loss",
    "tedious, overlong and painfully predictable",
    "one of the best movies of the year, sharp and funny",
    "the characters are dull and the dialogue is worse",
]
EOT = "<|endoftext|>"


def _tokenizer(vocab_size: int) -> Any:
    """The byte-level BPE tokenizer every tiny model here shares."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(SENTENCES * 4, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOT, bos_token=EOT, unk_token=EOT)


def tiny_gpt2_dir(root: Path, *, vocab_size: int = 400, n_layer: int = 2) -> str:
    """Save a random-init ``GPT2Model`` and a byte-level BPE tokenizer under ``root``; returns the path."""
    import torch
    from transformers import GPT2Config, GPT2Model

    tok = _tokenizer(vocab_size)
    eot = tok.convert_tokens_to_ids(EOT)
    cfg = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=n_layer, n_head=2,
                     bos_token_id=eot, eos_token_id=eot)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = GPT2Model(cfg)
    model.save_pretrained(root)
    tok.save_pretrained(root)
    return str(root)


# Tiny configs of the families the split-LLM code supports beyond GPT-2 and BERT (hidden 32, 4 heads,
# 3 blocks; Mistral, Qwen2 and Gemma2 with a sliding window shorter than the test texts, so the sliding
# mask matters; OPT and ELECTRA with an embedding size unlike the hidden size; DeBERTa-v2 with relative
# attention and the convolution after block 0).
_DEC = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=64)
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", _DEC),
    "mistral": ("MistralConfig", {**_DEC, "sliding_window": 4}),
    "qwen2": ("Qwen2Config", {**_DEC, "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}),
    "qwen3": ("Qwen3Config", {**_DEC, "head_dim": 8}),
    "phi3": ("Phi3Config", {**_DEC, "pad_token_id": 0}),
    "gemma2": ("Gemma2Config", {**_DEC, "head_dim": 8, "sliding_window": 4}),
    "gpt_neox": ("GPTNeoXConfig", dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                       num_attention_heads=4, max_position_embeddings=64)),
    "opt": ("OPTConfig", dict(hidden_size=32, ffn_dim=64, num_hidden_layers=3, num_attention_heads=4,
                              max_position_embeddings=64, word_embed_proj_dim=16)),  # project_in / project_out
    "distilbert": ("DistilBertConfig", dict(dim=32, hidden_dim=64, n_layers=3, n_heads=4, max_position_embeddings=64)),
    "electra": ("ElectraConfig", dict(embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                                      intermediate_size=64, max_position_embeddings=64)),  # embeddings_project
    "mpnet": ("MPNetConfig", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
                                  max_position_embeddings=66)),
    "deberta_v2": ("DebertaV2Config", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                                           intermediate_size=64, max_position_embeddings=64, relative_attention=True,
                                           position_buckets=8, norm_rel_ebd="layer_norm", conv_kernel_size=3,
                                           pos_att_type=["p2c", "c2p"], share_att_key=True,
                                           position_biased_input=False)),
    "modernbert": ("ModernBertConfig", dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                            num_attention_heads=4, max_position_embeddings=64, local_attention=4,
                                            global_attn_every_n_layers=2, pad_token_id=0, cls_token_id=0,
                                            sep_token_id=0)),  # local (sliding) layers with a window of 4
    "t5": ("T5Config", dict(d_model=32, d_kv=8, d_ff=64, num_layers=3, num_heads=4, relative_attention_num_buckets=8,
                            decoder_start_token_id=0)),  # saved whole; loaded as T5EncoderModel
}
ENCODERS = ("distilbert", "electra", "mpnet", "deberta_v2", "modernbert", "t5")


def tiny_lm_dir(root: Path, family: str, *, dtype: str = "float32", vocab_size: int = 400) -> str:
    """Save a random-init base model of ``family`` (a key of ``FAMILIES``) in ``dtype`` with the shared
    byte-level tokenizer under ``root``; returns the path."""
    import torch
    import transformers
    from transformers import AutoModel

    tok = _tokenizer(vocab_size)
    eot = tok.convert_tokens_to_ids(EOT)
    name, kw = FAMILIES[family]
    cfg = getattr(transformers, name)(vocab_size=len(tok), bos_token_id=eot, eos_token_id=eot, **kw)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = AutoModel.from_config(cfg)
        with torch.no_grad():  # random-init norms are all ones and biases zero: perturb so every weight matters
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
    model.to(getattr(torch, dtype)).save_pretrained(root)
    tok.save_pretrained(root)
    return str(root)
