"""Gradient-boosted trees across parties (SecureBoost): the label holder grows XGBoost's trees from the
passive parties' (encrypted) per-bin histograms of their own columns. Protocol: ``wire.py``; the
strategy: ``strategies/secureboost.py``; who learns what: ``docs/trees.md``."""
