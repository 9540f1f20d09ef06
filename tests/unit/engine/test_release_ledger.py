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
    assert [json.loads(x)["record"] for x in path.read_text().splitlines()] == ["ledger", "release"]
    led.begin(epoch=1, events=[EV4], fresh=True)
    led.amend(2, [EV4])  # unchanged: nothing written
    led.amend(2, [EV3])
    led.note_restore(reason="resume", checkpoint_epoch=0, charged=led.releases()[1:])
    again = ReleaseLedger(path)
    assert [(r.seq, r.epoch, r.events) for r in again.releases()] == [(1, 0, (EV4,)), (2, 1, (EV3,))]
    assert [(r["reason"], r["checkpoint_epoch"], r["charged"]) for r in again.restores] == [("resume", 0, [2])]
    assert len(path.read_text().splitlines()) == 5  # the hash chain's header first
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_torn_last_line_is_ignored_a_damaged_middle_line_is_named(tmp_path):
    path = tmp_path / LEDGER_FILE
    led = ReleaseLedger(path)
    led.begin(epoch=0, events=[EV4], fresh=True)
    with open(path, "a") as f:
        f.write('{"record": "release", "seq": 2, "ep')  # died while appending: never sent
    assert [r.seq for r in ReleaseLedger(path).releases()] == [1]
    path.write_text(path.read_text().replace('"seq": 2, "ep', '"seq": 2, "ep\n') + '{"record": "restore"}\n')
    with pytest.raises(RunDirError, match=rf"{LEDGER_FILE} line 3 is not a privacy ledger record"):
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


# ---- a torn write (issue 47, item 1) -----------------------------------------------------------------
TORN = b'{"record": "release", "seq": 3, "epo'  # a release whose append died part-way: never sent


def _two_releases(path):
    led = ReleaseLedger(path, repair=True)
    led.begin(epoch=0, events=[EV4], fresh=True)
    led.begin(epoch=1, events=[EV4], fresh=True)
    return led


@pytest.mark.parametrize("fault", ["torn", "no_newline", "none"])
def test_a_torn_tail_is_cut_on_open_and_the_next_record_is_never_glued(tmp_path, fault):
    """The issue's four commands on the ledger alone: two epochs, torn bytes appended (or a record that lost
    only its newline), a writer opens it and appends (`--resume ... epochs=3`), a second writer opens it
    (`epochs=4`): before, the second open failed forever ("line 3 is not a privacy ledger record"). Control
    (``none``): the same steps without the fault."""
    path = tmp_path / LEDGER_FILE
    _two_releases(path)
    whole = path.read_bytes()
    if fault == "torn":
        path.write_bytes(whole + TORN)
    elif fault == "no_newline":  # the append wrote every byte but the newline
        ReleaseLedger(path).begin(epoch=2, events=[EV4], fresh=True)
        path.write_bytes(path.read_bytes()[:-1])
    warned: list[str] = []
    first = ReleaseLedger(path, repair=True, warn=warned.append)  # the resume to epochs=3
    first.begin(epoch=2, events=[EV4], fresh=True)
    second = ReleaseLedger(path, repair=True, warn=warned.append)  # the resume to epochs=4: before, RunDirError
    second.begin(epoch=3, events=[EV4], fresh=True)
    again = ReleaseLedger(path)
    assert all(line.endswith(b"}") for line in path.read_bytes().splitlines())
    aside = sorted(tmp_path.glob(f"{LEDGER_FILE}.torn-*"))
    if fault == "torn":
        assert [r.seq for r in again.releases()] == [1, 2, 3, 4]
        assert len(warned) == 1 and "cut and kept in" in warned[0] and f"{len(TORN)} byte(s)" in warned[0]
        assert [a.read_bytes() for a in aside] == [TORN]
    elif fault == "no_newline":  # the whole record was announced: it stays charged
        assert [r.seq for r in again.releases()] == [1, 2, 3, 4, 5]
        assert len(warned) == 1 and "newline was added" in warned[0] and aside == []
    else:
        assert [r.seq for r in again.releases()] == [1, 2, 3, 4] and warned == [] and aside == []


def test_a_line_an_older_version_glued_onto_torn_bytes_is_split(tmp_path):
    """A ledger damaged before this fix (the next record appended onto torn bytes) resumes again."""
    path = tmp_path / LEDGER_FILE
    _two_releases(path)
    path.write_bytes(path.read_bytes() + TORN)
    ReleaseLedger(path).begin(epoch=2, events=[EV4], fresh=True)  # a reader-writer of old: no repair, glued
    with pytest.raises(RunDirError, match="line 4 is not a privacy ledger record"):  # what users were stuck with
        ReleaseLedger(path)
    warned: list[str] = []
    led = ReleaseLedger(path, repair=True, warn=warned.append)
    assert [r.seq for r in led.releases()] == [1, 2, 3] and len(warned) == 1


def test_a_short_write_raises_and_its_bytes_are_cut_before_the_next_append(tmp_path, monkeypatch):
    """``os.write`` that writes part of the line, then fails (a full disk): the append raises, never passes
    as durable, and the same ledger's next append first cuts the torn bytes (the subprocess test with a
    real file-size limit: tests/e2e/test_ledger_full_disk.py)."""
    import os

    from vfl.privacy.accounting import ledger_file

    path = tmp_path / LEDGER_FILE
    led = _two_releases(path)
    real_write, calls = os.write, []

    def short(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:10]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ledger_file.os, "write", short)
    with pytest.raises(RunDirError, match="No space left on device"):
        led.begin(epoch=2, events=[EV4], fresh=True)
    monkeypatch.setattr(ledger_file.os, "write", real_write)
    assert calls[1] == calls[0] - 10  # the rest was tried: a short write is not the end of an append
    assert led.last_seq == 2
    warned: list[str] = []
    led._warn = warned.append
    assert led.begin(epoch=2, events=[EV4], fresh=True) == 3
    assert [r.seq for r in ReleaseLedger(path).releases()] == [1, 2, 3] and len(warned) == 1


def test_the_hash_chain_names_an_edited_deleted_or_reordered_record(tmp_path):
    path = tmp_path / LEDGER_FILE
    led = _two_releases(path)
    led.begin(epoch=2, events=[EV4], fresh=True)
    lines = path.read_bytes().splitlines(keepends=True)
    assert led.head == __import__("hashlib").sha256(lines[-1].rstrip(b"\n")).hexdigest()
    for damaged in ([lines[0], lines[2], lines[1], lines[3]], [lines[0], lines[2], lines[3]],
                    [lines[0], lines[1].replace(b'"epoch": 0', b'"epoch": 1'), lines[2], lines[3]]):
        path.write_bytes(b"".join(damaged))
        with pytest.raises(RunDirError, match=r"line [23] does not follow the line before it"):
            ReleaseLedger(path)
    path.write_bytes(b"".join(lines))  # control: the ledger as written
    assert [r.seq for r in ReleaseLedger(path).releases()] == [1, 2, 3]
