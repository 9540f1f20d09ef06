"""Registered algorithms, declared by name: importing this package lists every built-in strategy and
imports none of them; a strategy's module is imported (and registers its class) when the strategy is
first asked for (``STRATEGIES.get(name)``), so a run imports only what it runs (``vfl/core/registry.py``)."""

# vfl before anything of ours imports flwr: its warnings filter (vfl/__init__.py, cheap: the API is lazy)
# silences flwr's protobuf gencode notices (nine lines when this package is imported first).
import vfl  # noqa: F401
from vfl.engine.strategy import STRATEGIES

BUILTIN: dict[str, str] = {  # strategy name -> the module that registers it (the one place that lists them)
    "dcor": "strategies.dcor",
    "head-only": "strategies.head_only",
    "ldp": "strategies.ldp",
    "npq": "strategies.npq",
    "npq+secagg": "strategies.npq_secagg",
    "p3eft": "strategies.p3eft",
    "pbm": "strategies.pbm",
    "pslf": "strategies.pslf",
    "sap": "strategies.sap",
    "secureboost": "strategies.secureboost",
    "split-lora": "strategies.split_lora",
    "ushape-lora": "strategies.ushape",
    "ushape-p3eft": "strategies.ushape",
}

for _name, _module in BUILTIN.items():
    if _name not in STRATEGIES:  # declared once per process (a re-import of this package adds nothing)
        STRATEGIES.declare(_name, _module)
