"""How ``vfl.run`` shows progress: in a Jupyter/IPython kernel a notebook bar when tqdm can draw
one (``tqdm.auto`` picked ``tqdm.notebook``: ipywidgets installed), else one line per epoch (a
terminal bar's carriage returns garble a notebook cell); anywhere else today's terminal bar (tqdm
draws it only when stderr is a terminal). ``choose`` is pure; ``detect`` reads the real environment.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["off", "terminal", "notebook", "lines"]


@dataclass(frozen=True)
class Environment:
    """``kernel``: running inside a Jupyter/IPython kernel; ``notebook_bar``: tqdm.auto draws widgets."""

    kernel: bool
    notebook_bar: bool


def choose(*, progress: bool | None, env: Environment) -> Mode:
    """The progress display for ``progress`` (False: none; None: automatic; True: forced) in ``env``."""
    if progress is False:
        return "off"
    if env.kernel:
        return "notebook" if env.notebook_bar else "lines"
    return "terminal"


def engine_progress(mode: Mode, progress: bool | None) -> bool | None:
    """The engine's ``progress`` argument for ``mode`` (its bars are ``tqdm.auto`` bars)."""
    if mode == "notebook":
        return True  # tqdm.notebook draws whatever stdout is
    if mode == "terminal":
        return progress  # None: tqdm's own check (a bar only on a terminal); True: always
    return False


def in_kernel(modules: Mapping[str, Any]) -> bool:
    """True inside a Jupyter/IPython kernel: ipykernel loaded and ``get_ipython()`` has a kernel."""
    if "ipykernel" not in modules or "IPython" not in modules:
        return False
    shell = modules["IPython"].get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def draws_widgets(bar: type) -> bool:
    """True when the tqdm class ``bar`` is a notebook bar: a ``tqdm.notebook`` class in its MRO.

    In a kernel ``tqdm.auto.tqdm`` is a subclass defined in ``tqdm.auto`` (notebook + asyncio), so its
    own ``__module__`` never names ``tqdm.notebook``."""
    return any(c.__module__ == "tqdm.notebook" for c in bar.__mro__)


def _auto_is_notebook() -> bool:
    from tqdm.auto import tqdm  # what vfl/engine/engine.py draws with

    return draws_widgets(tqdm)


def detect(*, modules: Mapping[str, Any] | None = None) -> Environment:
    """The running process's environment (``modules`` defaults to ``sys.modules``)."""
    kernel = in_kernel(sys.modules if modules is None else modules)
    return Environment(kernel=kernel, notebook_bar=kernel and _auto_is_notebook())
