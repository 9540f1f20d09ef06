"""SIGTERM and SIGHUP (the terminal closed, an ssh session dropped) handled like SIGINT: the run unwinds
(our Ray shut down, the run directory unlocked) and the CLI prints one line naming the real run directory
(exit 143 and 129).

Ray's ``init`` installs its own SIGTERM handlers (Python ``sys.exit`` and a C++ stack dump), so
the CLI installs ours for the duration of a command and the runner re-installs it after Ray
started (``after_ray_init``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_ACTIVE = False
_received: int | None = None  # the last termination signal turned into Interrupted in this command
SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # each raises Interrupted, as SIGINT raises KeyboardInterrupt


class Interrupted(KeyboardInterrupt):
    """A termination signal turned into an exception (``KeyboardInterrupt`` so cleanup runs)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = signum
    raise Interrupted(signum)


def as_interrupted(exc: KeyboardInterrupt) -> Interrupted:
    """The termination signal behind ``exc``. Ray's blocking calls (``ray.get`` while a restart
    waits) replace the handler's ``Interrupted`` by a plain ``KeyboardInterrupt``: it is still the
    SIGTERM received during this command (exit 143), and SIGINT (130) only when none was."""
    if isinstance(exc, Interrupted):
        return exc
    return Interrupted(_received if _received is not None else signal.SIGINT)


def _install() -> None:
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _raise)


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While active, SIGTERM and SIGHUP raise ``Interrupted`` in the main thread."""
    global _ACTIVE, _received
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    _ACTIVE, _received = True, None
    _install()
    try:
        yield
    finally:
        _ACTIVE = False
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def after_ray_init() -> None:
    """Take SIGTERM (and SIGHUP) back from Ray (only inside ``terminate_as_interrupt``)."""
    if _ACTIVE:
        _install()
