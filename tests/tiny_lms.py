"""A tiny GPT-2 saved as a local Hugging Face directory, built without any download.

The model: ``GPT2Config(n_layer=2, n_head=2, n_embd=32)`` with random weights (seeded). The tokenizer: a
byte-level BPE (GPT-2's scheme) trained by the ``tokenizers`` library on a few fixed sentences and
wrapped in ``PreTrainedTokenizerFast`` with GPT-2's single special token ``<|endoftext|>`` and, like
GPT-2, no pad token (the loader pads with end-of-text). Byte-level: every text encodes, whatever
the training sentences were.
"""

from __future__ import annotations

from pathlib import Path

SENTENCES = [
    "a gripping, beautifully acted film that rewards patience",
    "the plot is thin and the jokes fall flat",
    "an unexpectedly moving story about friendship and loss",
    "tedious, overlong and painfully predictable",
    "one of the best movies of the year, sharp and funny",
    "the characters are dull and the dialogue is worse",
]
EOT = "<|endoftext|>"


def tiny_gpt2_dir(root: Path, *, vocab_size: int = 400, n_layer: int = 2) -> str:
    """Save a random-init ``GPT2Model`` and a byte-level BPE tokenizer under ``root``; returns the path."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2Model, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(SENTENCES * 4, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOT, bos_token=EOT, unk_token=EOT)
    eot = tok.convert_tokens_to_ids(EOT)
    cfg = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=n_layer, n_head=2,
                     bos_token_id=eot, eos_token_id=eot)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = GPT2Model(cfg)
    model.save_pretrained(root)
    tok.save_pretrained(root)
    return str(root)
