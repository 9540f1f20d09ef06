"""Registered algorithms. Importing this package registers every built-in strategy."""

# vfl before anything of ours imports flwr: its warnings filter (vfl/__init__.py, cheap: the API is lazy)
# silences flwr's protobuf gencode notices (nine lines when this package is imported first).
import vfl  # noqa: F401
from strategies import (  # noqa: F401  (one module per registered strategy)
    dcor,
    head_only,
    ldp,
    npq,
    npq_secagg,
    p3eft,
    pbm,
    pslf,
    sap,
    secureboost,
    split_lora,
    ushape,
)
