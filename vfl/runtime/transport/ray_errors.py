"""One translation of a failed Ray call into the project's errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from vfl.core.errors import PartyFailure, VFLError


def raise_ray_failure(ray: Any, exc: BaseException, *, round: str, culprit: str, dead: Callable[[], str]) -> NoReturn:
    """Re-raise ``exc`` (a RayTaskError, RayActorError or ActorDiedError of one call) as the VFLError a
    node raised, or a PartyFailure naming the hosts that really died (a chained call also fails when
    an upstream actor died), else ``culprit``."""
    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = getattr(exc, "cause", None)
        if isinstance(cause, VFLError):
            raise cause from None
        gone = dead()
        if gone:
            raise PartyFailure(gone, round, "its Ray actor died") from exc
        raise PartyFailure(culprit, round, f"{type(cause).__name__ if cause else 'error'}: "
                           f"{cause if cause else exc}") from exc
    raise PartyFailure(dead() or culprit, round, "its Ray actor died") from exc


def ray_cause(exc: BaseException) -> str:
    """A Ray error other than a task's or an actor's (the memory monitor's ``OutOfMemoryError``, a
    ``WorkerCrashedError``, a lost object) as a short cause: its type and first line."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else 'no detail'}"
