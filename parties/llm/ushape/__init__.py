"""Causal-LM fine-tuning over a U-shaped split: head and tail (with the LM head and the labels) on the
data holder, the body on the model server."""
