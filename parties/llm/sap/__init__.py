"""SAP (Shen et al., "A Split-and-Privatize Framework for Large Language Model Fine-Tuning",
arXiv:2312.15603): vendor, customer, model split, CTI and wire."""
