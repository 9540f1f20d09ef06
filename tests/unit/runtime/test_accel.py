"""``VFL_PLAIN``: which speed-ups a process turns off (vfl/runtime/accel.py), and a bad value is one line."""

from __future__ import annotations

import pytest

from vfl.core.errors import ConfigError
from vfl.runtime.accel import PLAIN_ENV, SPEEDUPS, plain_set


def test_the_grammar() -> None:
    assert plain_set(None) == plain_set("") == plain_set("0") == frozenset()
    assert plain_set("1") == plain_set("all") == frozenset(SPEEDUPS)
    assert plain_set(" records , party_batch ") == {"records", "party_batch"}
    with pytest.raises(ConfigError, match=rf"^{PLAIN_ENV}: unknown speed-up pbwire; allowed: 1, all or a comma list"):
        plain_set("records,pbwire")
