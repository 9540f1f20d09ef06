"""The write-ahead privacy ledger on its own: durable records, a torn last line, damaged lines,
and the accountant a restore continues with (never less than what was released)."""

from __future__ import annotations

import json

import pytest

from vfl.core.errors import RunDirError
from vfl.privacy import Accountant, PBMEvent
from vfl.privacy.accounting.wal import LEDGER_FILE, ReleaseLedger, restore_accountant

EV4 = PBMEvent(b=8, beta=0.25, num_parties=4, dim=4)
EV3 = PBMEvent(b=8, beta=0.25, num_parties=3, dim=4)  # a dropout: fewer binomials summed, costlier


def _eps(*counts: tuple[PBMEvent, int]) -> float:
    acc = Accountant()
    for ev, n in counts:
        for _ in range(n):
            acc.record(ev)
    return acc.epsilon(1e-5)[0]


def test_records_are_on_disk_and_read_back(tmp_path):
    path = tmp_path / LEDGER_FILE
    led = ReleaseLedger(path)
    assert led.begin(epoch=0, events=[EV4], fresh=True) == 1
    assert [json.loads(x)["record"] for x in path.read_text().splitlines()] == ["release"]
    led.begin(epoch=1, events=[EV4], fresh=True)
    led.amend(2, [EV4])  # unchanged: nothing written
    led.amend(2, [EV3])
    led.note_restore(reason="resume", checkpoint_epoch=0, charged=led.releases()[1:])
    again = ReleaseLedger(path)
    assert [(r.seq, r.epoch, r.events) for r in again.releases()] == [(1, 0, (EV4,)), (2, 1, (EV3,))]
    assert [(r["reason"], r["checkpoint_epoch"], r["charged"]) for r in again.restores] == [("resume", 0, [2])]
    assert len(path.read_text().splitlines()) == 4
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_torn_last_line_is_ignored_a_damaged_middle_line_is_named(tmp_path):
    path = tmp_path / LEDGER_FILE
    led = ReleaseLedger(path)
    led.begin(epoch=0, events=[EV4], fresh=True)
    with open(path, "a") as f:
        f.write('{"record": "release", "seq": 2, "ep')  # died while appending: never sent
    assert [r.seq for r in ReleaseLedger(path).releases()] == [1]
    path.write_text(path.read_text().replace('"seq": 2, "ep', '"seq": 2, "ep\n') + '{"record": "restore"}\n')
    with pytest.raises(RunDirError, match=rf"{LEDGER_FILE} line 2 is not a privacy ledger record"):
        ReleaseLedger(path)


def test_restore_charges_every_fresh_release_after_the_checkpoint():
    led = ReleaseLedger()  # in memory (an engine without a run directory)
    ckpt = Accountant()
    led.begin(epoch=0, events=[EV4], fresh=True)
    ckpt.record(EV4)  # epoch 0 committed: the checkpoint covers seq 1
    led.begin(epoch=1, events=[EV4], fresh=True)  # failed attempt, after a dropout
    led.amend(2, [EV3])
    led.begin(epoch=1, events=[EV4], fresh=True)  # failed again
    acc, charged = restore_accountant(saved=ckpt.to_json(), covered=1, ledger=led)
    assert [r.seq for r in charged] == [2, 3]
    assert acc.epsilon(1e-5)[0] == pytest.approx(_eps((EV4, 2), (EV3, 1)), rel=1e-12)
    # control: the checkpoint alone (the old restore) is smaller than what was released
    assert Accountant.from_json(ckpt.to_json()).epsilon(1e-5)[0] < acc.epsilon(1e-5)[0]
    assert restore_accountant(saved=None, covered=0, ledger=led)[0].epsilon(1e-5)[0] == pytest.approx(
        _eps((EV4, 2), (EV3, 1)), rel=1e-12)  # no checkpoint at all: every release is charged


def test_seeded_releases_are_not_charged_and_a_short_ledger_keeps_the_checkpoint():
    led = ReleaseLedger()
    led.begin(epoch=0, events=[EV4], fresh=False)
    assert restore_accountant(saved=None, covered=0, ledger=led) == (None, [])
    ckpt = Accountant()
    ckpt.record(EV4)
    warned: list[str] = []
    acc, charged = restore_accountant(saved=ckpt.to_json(), covered=5, ledger=led, warn=warned.append)
    assert charged == [] and acc.to_json() == ckpt.to_json()
    assert len(warned) == 1 and "ends at release 1 but the checkpoint covers 5" in warned[0]
