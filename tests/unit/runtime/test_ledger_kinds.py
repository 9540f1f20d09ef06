"""Bytes per message kind are counted per direction: a kind sent down (the request) and up (the
parties' replies) is split, not filed under the direction of its first message."""

from __future__ import annotations

import json

from vfl.runtime.ledger import CONTROL, DOWN, MIXED, UP, CommLedger, kind_bytes


def _ledger() -> CommLedger:
    led = CommLedger()
    led.record(phase="train", direction=DOWN, party="*", round="0", nbytes=100, payload=80, kind="train.forward")
    for p in range(3):
        led.record(phase="train", direction=UP, party=str(p), round="0", nbytes=50, payload=40, kind="train.forward")
    led.record(phase="setup", direction=UP, party="0", round="s", nbytes=7, payload=0, kind="query.psi_a")
    led.record(phase="setup", direction=CONTROL, party="0", round="s", nbytes=9, payload=0, kind="query.psi_a")
    return led


def test_a_kind_sent_both_ways_is_split_by_direction():
    led = _ledger()
    fwd = led.by_kind["train.forward"]
    assert fwd == {"direction": MIXED, "messages": 4, "bytes": 250, "payload": 200}  # totals stay totals
    split = led.by_kind_direction["train.forward"]
    assert split[DOWN] == {"messages": 1, "bytes": 100, "payload": 80}
    assert split[UP] == {"messages": 3, "bytes": 150, "payload": 120}
    assert split[UP]["bytes"] == led.totals("train")["bytes_up"]
    assert kind_bytes(led, "query.psi_") == 7  # control traffic is not counted as up/down


def test_the_split_survives_a_checkpoint_and_old_checkpoints_still_load():
    led = _ledger()
    state = json.loads(json.dumps(led.state()))
    again = CommLedger()
    again.load_state(state)
    assert again.by_kind_direction == led.by_kind_direction and again.by_kind == led.by_kind
    old = {"keys": state["keys"], "kinds": {"train.forward": {"direction": "up", "messages": 2, "bytes": 9,
                                                              "payload": 1}}}
    legacy = CommLedger()
    legacy.load_state(old)
    assert legacy.by_kind_direction == {"train.forward": {"up": {"messages": 2, "bytes": 9, "payload": 1}}}
    legacy.record(phase="train", direction=DOWN, party="*", round="1", nbytes=5, payload=0, kind="train.forward")
    assert legacy.by_kind["train.forward"]["direction"] == MIXED and legacy.by_kind_direction["train.forward"][DOWN]
