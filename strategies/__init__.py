"""Registered algorithms. Importing this package registers every built-in strategy."""

from strategies import npq  # noqa: F401
from strategies import npq_secagg  # noqa: F401
from strategies import p3eft  # noqa: F401  (also registers head-only, split-lora, dcor, pslf)
from strategies import sap  # noqa: F401
