"""Adversarial and audit nodes a run plants with ``attack.*`` (evaluation only): the malicious party, the model-completion and backdoor attackers, the audit canaries."""
