"""Core runtime of the framework: messages, transports, engine, strategies ABC, privacy, secagg.

Imports only go down: ``simulations -> strategies/parties -> vfl``; nothing here imports the
layers above (they register through the ``vfl.plugins`` entry points, see ``vfl/plugins.py``).

The Python API (``vfl.run``, ``vfl.resume_run``, ``vfl.resolve``, ``vfl.validate``, ``vfl.account``,
``vfl.RunResult``) lives in ``vfl/api.py`` and is imported on first use, so ``import vfl`` stays cheap.
"""

from typing import Any

__version__ = "0.1.0"

_API = ("run", "resume_run", "resolve", "validate", "account", "RunResult")
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from vfl import api

        return getattr(api, name)
    raise AttributeError(f"module 'vfl' has no attribute {name!r}")
