"""Registered algorithms. Importing this package registers every built-in strategy."""

from strategies import npq  # noqa: F401
from strategies import npq_secagg  # noqa: F401
from strategies import sap  # noqa: F401
