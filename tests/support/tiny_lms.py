"""The tiny random language models of ``parties/llm/common/tiny.py`` (``vfl tiny-lm``), re-exported for tests."""

from parties.llm.common.tiny import (  # noqa: F401
    ENCODERS,
    EOT,
    FAMILIES,
    SENTENCES,
    byte_tokenizer,
    tiny_gpt2_dir,
    tiny_lm_dir,
)

_tokenizer = byte_tokenizer
