"""Pieces both split-LLM protocols share: the local backbone, LoRA set-up, shared wire names."""

from parties.llm.common import encoders, rotary, seq2seq  # noqa: F401  (register their family detectors in arch.py)
