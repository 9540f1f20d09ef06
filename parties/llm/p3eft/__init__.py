"""P3EFT (Zmushko et al., "Label Privacy in Split Learning for Large Models with Parameter-Efficient
Training", ICLR 2025) and its split-API baselines: the client, the model servers and their wire."""
