"""How ``vfl.run`` shows progress: in a Jupyter/IPython kernel a notebook bar when tqdm can draw
one (``tqdm.auto`` picked ``tqdm.notebook``: ipywidgets installed), else one line per epoch (a
terminal bar's carriage returns garble a notebook cell); anywhere else today's terminal bar (tqdm
draws it only when stderr is a terminal). ``choose`` is pure; ``detect`` reads the real environment.

Long phases that are not epochs (starting the nodes, an evaluation, the leak scoring after an epoch, the
generations) ``announce`` a line when they start and one with their seconds when they end (``Phase``),
and an epoch's steps one every 20 s (``StepLines``); ``vfl run`` prints them (``listening``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
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


# ---- announcements of long phases ------------------------------------------------------------------
Sink = Callable[[str, str], None]  # (text, kind): kind "phase" (what runs now, what it cost) or "step"
_sinks: list[Sink] = []


def announce(text: str, *, kind: str = "phase") -> None:
    """One line about what the run does now (starting nodes, scoring leakage, generating ...) or, with
    ``kind="step"``, how far an epoch's steps are: to every listener (``vfl run`` prints them), else nowhere."""
    for sink in list(_sinks):
        sink(text, kind)


@contextmanager
def listening(sink: Sink) -> Iterator[None]:
    """``announce`` calls reach ``sink`` inside the block."""
    _sinks.append(sink)
    try:
        yield
    finally:
        _sinks.remove(sink)


@dataclass
class Phase:
    """``with Phase("scoring leakage"):`` announces ``what`` once the block has run ``after_s`` seconds and, if
    it ran that long, its end with its seconds and ``note`` (a short phase says nothing: runs of many quick
    epochs stay one line each). ``seconds`` holds the duration after the block."""

    what: str
    note: str = ""
    after_s: float = 3.0
    seconds: float = 0.0

    def __enter__(self) -> Phase:
        self._t0 = time.perf_counter()
        self._timer = threading.Timer(self.after_s, announce, args=(f"{self.what} ...",))
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self.seconds = time.perf_counter() - self._t0
        if exc[0] is None and self.seconds >= self.after_s:
            announce(f"{self.what}: {self.seconds:.1f} s{self.note}")


@dataclass
class StepLines:
    """A ``kind="step"`` line every ``every_s`` seconds of an epoch: step k/N, seconds per step, time left."""

    epoch: int
    epochs: int
    steps: int
    first: int = 0
    every_s: float = 20.0

    def __post_init__(self) -> None:
        self._t0 = self._last = time.perf_counter()

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if now - self._last < self.every_s or done <= self.first:
            return
        self._last = now
        per = (now - self._t0) / (done - self.first)
        left = f", about {per * (self.steps - done):.0f} s left" if self.steps > done else ""
        announce(f"epoch {self.epoch + 1}/{self.epochs} step {done}/{self.steps} ({per:.2f} s/step{left})",
                 kind="step")
