"""``vfl verify``'s side of the privacy accounting: every printed ε recomputed from the privacy ledger and the
resolved config by a path apart from training (dp_accounting's events, the PBM RDP formula written again).

``mechanisms``: the registry keyed by a privacy event's kind; ``labels``: label DP per defense; ``ledger``: the
hash chain and the charging rule; ``check``: every check on a run's files. Nothing here imports the training
side's accountant (``vfl/privacy/accounting/accountant.py``, ``pbm_rdp.py``)."""
