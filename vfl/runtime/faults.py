"""Testing hooks: deterministic fault injection in hosts, and the secure-aggregation audit switch.

``VFL_FAULT_INJECT="party2@0:5"`` makes the host of node ``party2`` die when it is about to send
its message of round ``train:0:5`` (it computed and masked step 5 of epoch 0, so did the other
parties; nothing of it leaves). Grammar: ``NAME@[PHASE:]EPOCH:STEP[/KIND][!MODE]``, several
separated by commas; ``KIND`` restricts it to one message kind (e.g. ``query.secagg_unmask``: die
before revealing round keys); ``MODE`` is ``exit`` (default: ``os._exit`` in a Ray actor, an
:class:`InjectedCrash` when the host runs in the driver) or ``hang`` (never answer; Ray only, to
exercise ``transport.round_timeout_s``). ``VFL_SECAGG_AUDIT=1`` makes parties keep their plain
integer inputs per round and the server its sums, so tests can check a recovered sum: it is
honoured only together with the test-only opt-in ``VFL_TEST_HOOKS=1`` and never inside the CLI
(:func:`no_test_hooks`: ``vfl ...`` drops it from its environment, so it neither keeps inputs in
the driver's process nor reaches an actor). Both hooks are for tests and benchmarks only; a
driver program outside the CLI forwards them (and the opt-in) to its Ray actors.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from vfl.core.errors import ConfigError

if TYPE_CHECKING:  # the CLI imports this module: no flwr at its start-up
    from flwr.common import Message

FAULT_ENV = "VFL_FAULT_INJECT"
AUDIT_ENV = "VFL_SECAGG_AUDIT"
TEST_HOOKS_ENV = "VFL_TEST_HOOKS"  # the test-only opt-in a privacy-weakening hook also needs
PROFILE_ENV = "VFL_PROFILE"  # vfl.runtime.profile accumulators (overhead benchmark)
FORWARD_ENV = (FAULT_ENV, AUDIT_ENV, PROFILE_ENV, TEST_HOOKS_ENV)
_refused = False  # set inside the CLI (no_test_hooks): the audit hook is off whatever the environment says


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


def armed() -> bool:
    """Whether a fault is configured (``VFL_FAULT_INJECT``): a host reads it once per delivery."""
    return bool(os.environ.get(FAULT_ENV))


def check(node: str, replies: Sequence[Message], *, in_driver: bool = False) -> None:
    """Called by a host before the replies of ``node`` leave it: die here if a fault says so."""
    spec = os.environ.get(FAULT_ENV)
    if not spec or not replies:
        return
    from vfl.runtime.message import round_of

    for fault in parse_faults(spec):
        if fault.node != node:
            continue
        if any(round_of(m) == fault.round and fault.kind in ("", m.metadata.message_type) for m in replies):
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


def audit_enabled() -> bool:
    """True when ``VFL_SECAGG_AUDIT=1`` and the opt-in ``VFL_TEST_HOOKS=1`` are both set, outside the
    CLI: keep plain inputs and sums for tests (never in a run started with ``vfl``)."""
    return not _refused and os.environ.get(AUDIT_ENV) == "1" and os.environ.get(TEST_HOOKS_ENV) == "1"


@contextmanager
def no_test_hooks() -> Iterator[None]:
    """Within: the audit hook is off in this process and absent from the environment that hosts
    started here inherit or are forwarded (the CLI runs every command inside this)."""
    global _refused
    before, saved = _refused, os.environ.pop(AUDIT_ENV, None)
    _refused = True
    try:
        yield
    finally:
        _refused = before
        if saved is not None:
            os.environ[AUDIT_ENV] = saved
