"""First try works: a config of defaults only trains and learns (an in-process run)."""

from __future__ import annotations

import vfl


def test_a_config_of_defaults_only_learns():
    result = vfl.run({"strategy": "npq", "train": {"epochs": 3}})  # digits, 4 parties, every other key default
    assert result.summary["final_test_acc"] > 0.8  # was 0.17 after 10 epochs with lr 0.01, no momentum
