"""SIGINT/SIGTERM within ``deferred_signals`` are handled on leaving the block (a compiled Ray step
is never interrupted inside Ray's channel read), a second one at once, and handlers that are not
Python's are left alone."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

from vfl.runtime.transport.deferred_signals import deferred_signals


class Stop(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise(signum, frame):
    raise Stop(signum)


@pytest.fixture
def raising() -> Iterator[None]:
    """SIGINT and SIGTERM raise ``Stop`` (as the CLI's handlers raise an interrupt)."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in before:
        signal.signal(s, _raise)
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_inside_the_block_is_raised_when_it_ends(raising, sig):
    reached = []
    with pytest.raises(Stop) as info:
        with deferred_signals():
            signal.raise_signal(sig)
            reached.append("after the signal")  # the block runs to its end
    assert reached == ["after the signal"] and info.value.signum == sig
    assert signal.getsignal(signal.SIGINT) is _raise and signal.getsignal(signal.SIGTERM) is _raise


def test_without_a_signal_nothing_is_raised_and_handlers_are_back(raising):
    with deferred_signals():
        assert signal.getsignal(signal.SIGTERM) is not _raise  # held back here
    assert signal.getsignal(signal.SIGINT) is _raise and signal.getsignal(signal.SIGTERM) is _raise


def test_an_error_of_the_block_is_kept_and_the_signal_still_raised(raising):
    with pytest.raises(Stop) as info:
        with deferred_signals():
            signal.raise_signal(signal.SIGTERM)
            raise ValueError("the step failed")
    assert isinstance(info.value.__context__, ValueError)


def test_a_second_signal_is_handled_at_once(raising):
    reached = []
    with pytest.raises(Stop) as info:
        with deferred_signals():
            signal.raise_signal(signal.SIGTERM)
            reached.append("after the first")
            signal.raise_signal(signal.SIGINT)
            reached.append("after the second")
    assert reached == ["after the first"]
    assert info.value.signum == signal.SIGTERM  # the first one is what the handlers get
    assert signal.getsignal(signal.SIGINT) is _raise and signal.getsignal(signal.SIGTERM) is _raise


def test_nested_blocks_hand_the_signal_outwards(raising):
    reached = []
    with pytest.raises(Stop):
        with deferred_signals():
            with deferred_signals():
                signal.raise_signal(signal.SIGTERM)
            reached.append("outer block goes on")
    assert reached == ["outer block goes on"]


def test_ignored_and_default_dispositions_are_left_alone():
    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with deferred_signals():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            signal.raise_signal(signal.SIGTERM)  # ignored, as without the block
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)


def test_off_the_main_thread_nothing_changes(raising):
    seen = []

    def worker():
        with deferred_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [_raise]
