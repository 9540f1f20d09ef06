"""SIGINT/SIGTERM held back while a Ray Compiled Graph step is in flight, delivered right after.

A signal handler that raises (``KeyboardInterrupt``, the CLI's SIGTERM-as-interrupt) can fire
inside Ray's channel read, while a frame holds a ``Buffer`` over the channel's shared memory.
The exception's traceback keeps that frame alive while the run unwinds and Ray shuts down; when
the traceback is finally freed, the buffer's destructor releases a read on Ray's already-destroyed
mutable-object manager and the process dies with SIGSEGV. Held back until the step returned, the
same signal raises between steps, where no frame holds a channel buffer.
"""

from __future__ import annotations

import _signal  # the C functions behind ``signal``: its wrappers' enum conversions cost ~8 µs a call
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

DEFERRED = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM are recorded instead of handled; on leaving it the
    previous handlers are back and the first recorded signal is raised again for them. A second
    signal within the block puts the handlers back and hands them the first one at once (a user
    who insists is not kept waiting on a step that hangs). Only signals with a Python handler are
    held back (the default action, an ignored signal or a handler set outside Python stay as they
    are), and only on the main thread (the only one where Python runs signal handlers)."""
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # Python handlers run only there
        previous = {s: h for s in DEFERRED if callable(h := _signal.getsignal(s))}
    pending: list[int] = []

    def restore() -> None:
        for s, handler in previous.items():
            _signal.signal(s, handler)

    def record(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)
        if len(pending) == 2:  # asked twice: stop now
            restore()
            previous[pending[0]](pending[0], frame)

    for s in previous:
        _signal.signal(s, record)
    try:
        yield
    finally:
        if len(pending) < 2:
            restore()
            if pending:
                signal.raise_signal(pending[0])
