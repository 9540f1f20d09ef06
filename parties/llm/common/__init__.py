"""Pieces both split-LLM protocols share: the local backbone, LoRA set-up, shared wire names."""
