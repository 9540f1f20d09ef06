"""Fault injection for chaos experiments: ``VFL_FAULT_INJECT`` kills or hangs a host at a given round.

``VFL_FAULT_INJECT="party2@0:5"`` makes the host of node ``party2`` die when it is about to send
its message of round ``train:0:5`` (it computed and masked step 5 of epoch 0, so did the other
parties; nothing of it leaves). Grammar: ``NAME@[PHASE:]EPOCH:STEP[/KIND][!MODE]``, several
separated by commas; ``KIND`` restricts it to one message kind (e.g. ``query.secagg_unmask``: die
before revealing round keys); ``MODE`` is ``exit`` (default: ``os._exit`` in a Ray actor, an
:class:`InjectedCrash` when the host runs in the driver) or ``hang`` (never answer; Ray only, to
exercise ``transport.round_timeout_s``). A host parses the variable once, when it is built
(:meth:`FaultPlan.from_env`; Ray actors get it forwarded): unset, the host holds no plan and its
deliveries never look. docs/failures.md has the experiments it serves.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from vfl.core.errors import ConfigError
from vfl.runtime.message import round_of

if TYPE_CHECKING:
    from flwr.common import Message

FAULT_ENV = "VFL_FAULT_INJECT"
PROFILE_ENV = "VFL_PROFILE"  # vfl.runtime.profile accumulators (overhead benchmark)
FORWARD_ENV = (FAULT_ENV, PROFILE_ENV, "VFL_PLAIN")  # what a Ray host is handed of the driver's environment
# (VFL_PLAIN: the speed-ups a measurement turns off, vfl/runtime/accel.py)


class InjectedCrash(Exception):  # noqa: N818 - it is a simulated death, not an error of the code
    """A host running in the driver 'dies'; carries the replies it never sent (late messages)."""

    def __init__(self, node: str, replies: Sequence[Message]) -> None:
        self.node = node
        self.replies = list(replies)
        super().__init__(f"injected crash of {node}")


@dataclass(frozen=True)
class Fault:
    node: str
    round: str  # "phase:epoch:step"
    kind: str = ""
    mode: str = "exit"


@lru_cache(maxsize=8)
def parse_faults(spec: str) -> tuple[Fault, ...]:
    """Parse a ``VFL_FAULT_INJECT`` value; ConfigError naming the variable on bad syntax."""
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        try:
            node, rest = item.split("@", 1)
            rest, _, mode = rest.partition("!")
            where, _, kind = rest.partition("/")
            parts = where.split(":")
            phase, epoch, step = (["train", *parts] if len(parts) == 2 else parts)
            round_ = f"{phase}:{int(epoch)}:{int(step)}"
        except ValueError:
            raise ConfigError(FAULT_ENV, f"cannot parse {item!r}; expected NAME@[PHASE:]EPOCH:STEP[/KIND][!exit|hang]"
                              ) from None
        if mode not in ("", "exit", "hang") or not node:
            raise ConfigError(FAULT_ENV, f"{item!r}: mode must be exit or hang")
        out.append(Fault(node, round_, kind, mode or "exit"))
    return tuple(out)


@dataclass(frozen=True)
class FaultPlan:
    """The faults of ``VFL_FAULT_INJECT``, parsed once; ``check`` is called by a host before replies leave it."""

    faults: tuple[Fault, ...]

    @classmethod
    def from_env(cls) -> FaultPlan | None:
        """The plan in this process's environment, or None when no fault is configured."""
        spec = os.environ.get(FAULT_ENV)
        return cls(parse_faults(spec)) if spec else None

    def check(self, node: str, replies: Sequence[Message], *, in_driver: bool = False) -> None:
        """Die here if a fault names ``node`` and the round (and kind) of one of its ``replies``."""
        for fault in self.faults:
            if fault.node == node and any(round_of(m) == fault.round and fault.kind in ("", m.metadata.message_type)
                                          for m in replies):
                _die(fault, replies, in_driver=in_driver)


def _die(fault: Fault, replies: Sequence[Message], *, in_driver: bool) -> None:
    if fault.mode == "hang":
        if in_driver:
            raise ConfigError(FAULT_ENV, "a 'hang' fault needs the ray transport (it would block the driver)")
        while True:  # a straggler that never answers; the driver kills it after round_timeout_s
            time.sleep(3600)
    if in_driver:
        raise InjectedCrash(fault.node, replies)
    os._exit(17)  # a dead actor, as after a crash or a kill
