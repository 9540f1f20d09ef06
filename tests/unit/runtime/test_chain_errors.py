"""A failed compiled step's error keeps nothing of Ray's read frames alive (``forget_frames``): an
object such a frame holds (in Ray, a ``Buffer`` over a channel's shared memory, which crashes the
process if freed after ``ray.shutdown``) is freed while the PartyFailure is still held."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
import ray

from vfl.core.errors import PartyFailure
from vfl.runtime.fast.ray_chain import CompiledChain, forget_frames


class _Buffer:
    """Stands for the channel buffer a read frame holds."""


class _Ref:
    def __init__(self, error: BaseException, held: list[weakref.ref[_Buffer]]) -> None:
        self.error, self.held = error, held

    def get(self, timeout: float | None = None) -> Any:
        buffer = _Buffer()  # a local of the failing read, like Ray's channel read
        self.held.append(weakref.ref(buffer))
        raise self.error


class _Dag:
    def __init__(self, error: BaseException, held: list[weakref.ref[_Buffer]]) -> None:
        self.error, self.held = error, held

    def execute(self, wires: list[Any]) -> _Ref:
        return _Ref(self.error, self.held)


class _Ray:
    """``ray.get`` on the fake reference; Ray's real exception classes."""

    exceptions = ray.exceptions

    @staticmethod
    def get(ref: _Ref, timeout: float | None = None) -> Any:
        return ref.get(timeout)


def _chain(error: BaseException, held: list[weakref.ref[_Buffer]]) -> CompiledChain:
    chain = object.__new__(CompiledChain)
    chain._ray, chain.hops, chain._dag = _Ray(), (("server",), ("parties-0",)), _Dag(error, held)
    chain._names, chain._dead = (lambda name: name), (lambda: "")
    return chain


@pytest.mark.parametrize("error", [
    ray.exceptions.RayChannelTimeoutError("late"),
    ray.exceptions.RayChannelError("closed"),
    ray.exceptions.GetTimeoutError("late"),
], ids=["timeout", "channel-closed", "get-timeout"])
def test_the_failure_of_a_compiled_step_frees_what_the_read_held(error: BaseException) -> None:
    held: list[weakref.ref[_Buffer]] = []
    with pytest.raises(PartyFailure) as info:
        _chain(error, held).run([], round="train:0:3", timeout_s=1.0)
    failure = info.value
    assert failure.round == "train:0:3"
    gc.collect()
    assert held and held[0]() is None  # the read frame's local is gone though the error is alive
    del failure, info


def test_forget_frames_is_what_frees_it() -> None:
    """Control: the same error, not forgotten, keeps the read's local alive through its traceback."""
    held: list[weakref.ref[_Buffer]] = []
    ref = _Ref(ray.exceptions.RayChannelError("closed"), held)
    try:
        ref.get()
    except ray.exceptions.RayChannelError as exc:
        kept = exc
    gc.collect()
    assert held[0]() is not None
    forget_frames(kept)
    gc.collect()
    assert held[0]() is None


def test_forget_frames_walks_the_chain_once() -> None:
    a, b = ValueError("a"), KeyError("b")
    for e in (a, b):
        try:
            raise e
        except Exception:
            pass
    a.__cause__, b.__context__ = b, a  # a cycle
    forget_frames(a)
    assert a.__traceback__ is None and b.__traceback__ is None


def test_other_errors_keep_their_traceback() -> None:
    """Not a Ray error (a bug of ours): re-raised as it is, with its traceback for debugging."""
    held: list[weakref.ref[_Buffer]] = []
    with pytest.raises(ZeroDivisionError) as info:
        _chain(ZeroDivisionError("bug"), held).run([], round="train:0:1", timeout_s=1.0)
    assert info.value.__traceback__ is not None


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, type("Interrupted", (KeyboardInterrupt,), {})],
                         ids=["sigint", "sigterm-as-interrupt"])
def test_an_interrupt_inside_the_read_leaves_without_its_frames(interrupt: type[BaseException]) -> None:
    """A second SIGINT/SIGTERM within a step (``deferred_signals`` hands it over at once) raises
    inside Ray's read: it still reaches the caller as itself, but frees what the read held."""
    held: list[weakref.ref[_Buffer]] = []
    with pytest.raises(interrupt) as info:
        _chain(interrupt(), held).run([], round="train:0:2", timeout_s=1.0)
    gc.collect()
    assert held and held[0]() is None
    del info
