"""Registered algorithms. Importing this package registers every built-in strategy."""

from strategies import (  # noqa: F401  (p3eft also registers head-only, split-lora, dcor, pslf)
    ldp,
    npq,
    npq_secagg,
    p3eft,
    pbm,
    sap,
)
