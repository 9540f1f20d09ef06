"""Issue 47, item 1, with a real full disk: a process whose file-size limit (RLIMIT_FSIZE) stops the
privacy ledger's append part-way. Before, ``os.write`` returned the short count unchecked and the release
passed as durable (then went out) with half its line on disk; now the append raises, and the next writer cuts
the torn bytes (kept aside, one warning) and appends a whole line. The control: the same append under a
limit with room for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_cli_processes import ENV
from vfl.privacy import PBMEvent
from vfl.privacy.accounting.wal import LEDGER_FILE, ReleaseLedger

CHILD = r"""
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the limit then fails the write (EFBIG) instead of killing
from vfl.core.errors import RunDirError
from vfl.privacy import PBMEvent
from vfl.privacy.accounting.wal import ReleaseLedger
path, room = sys.argv[1], int(sys.argv[2])
led = ReleaseLedger(path, repair=True)
ev = PBMEvent(b=8, beta=0.25, num_parties=4, dim=4)
led.begin(epoch=0, events=[ev], fresh=True)
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + room, resource.RLIM_INFINITY))
try:
    led.begin(epoch=1, events=[ev], fresh=True)
    print("durable")
except RunDirError as exc:
    print("error:", exc)
"""


def _child(path: Path, room: int) -> str:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(room)], env=ENV, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("room", [40, 4096], ids=["disk_full", "control"])
def test_an_append_the_disk_cuts_short_raises_and_is_cut_before_the_next(tmp_path, room):
    path = tmp_path / LEDGER_FILE
    said = _child(path, room)
    lines = path.read_bytes().split(b"\n")
    if room == 4096:
        assert said == "durable" and lines[-1] == b"" and len(lines) == 4
        assert not list(tmp_path.glob("*.torn-*"))
        return
    assert said.startswith(f"error: cannot write {path}: File too large"), said  # before: "durable"
    assert len(lines[-1]) == room and not lines[-1].endswith(b"}")  # the torn bytes the limit let through
    warned: list[str] = []
    led = ReleaseLedger(path, repair=True, warn=warned.append)  # the next writer (a resume)
    assert led.last_seq == 1
    led.begin(epoch=1, events=[PBMEvent(b=8, beta=0.25, num_parties=4, dim=4)], fresh=True)
    assert [json.loads(x)["record"] for x in path.read_bytes().splitlines()] == ["ledger", "release", "release"]
    assert [r.seq for r in ReleaseLedger(path).releases()] == [1, 2]
    (aside,) = tmp_path.glob(f"{LEDGER_FILE}.torn-*")
    assert aside.read_bytes() == lines[-1] and len(warned) == 1 and aside.name in warned[0]
