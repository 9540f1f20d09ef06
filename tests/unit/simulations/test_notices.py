"""`vfl` says once, on a terminal, that the psi extra holds protobuf (and flwr's grpcio-health-checking) at
openmined-psi's pin (issue 48; docs/install.md): the state is read from the installed metadata, the note is
printed on the first command and not again, and not at all off a terminal or without the pin."""

from __future__ import annotations

import io

import pytest

from simulations.cli import notices
from simulations.cli.main import main

VERSIONS = {"openmined-psi": "2.0.6", "protobuf": "6.30.2", "grpcio-health-checking": "1.73.1"}


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def pinned(monkeypatch, tmp_path):
    versions = dict(VERSIONS)
    monkeypatch.setattr(notices, "_version", versions.get)
    monkeypatch.setattr(notices.metadata, "requires", lambda name: ["protobuf==6.30.2"] if name == notices.PSI else [])
    monkeypatch.setenv("VFL_CACHE_DIR", str(tmp_path))
    return versions


def test_the_state_is_the_installed_protobuf_at_the_psi_pin(pinned):
    assert notices.psi_protobuf_pin() == {"psi": "2.0.6", "protobuf": "6.30.2", "grpcio_health_checking": "1.73.1"}
    pinned["protobuf"] = "6.33.6"  # psi installed, protobuf not held (e.g. installed over it): no note
    assert notices.psi_protobuf_pin() is None
    pinned.pop("openmined-psi")
    assert notices.psi_protobuf_pin() is None


def test_the_note_is_printed_once_on_a_terminal_and_names_the_versions(pinned):
    off = io.StringIO()
    assert notices.notify_once(off) is False and off.getvalue() == ""  # a log or a pipe: never
    tty = Tty()
    assert notices.notify_once(tty) is True
    assert notices.notify_once(tty) is False  # once
    (line,) = tty.getvalue().splitlines()
    assert "protobuf==6.30.2" in line and "grpcio-health-checking at 1.73.1" in line and "docs/install.md" in line
    pinned["grpcio-health-checking"] = "1.71.0"  # another state: told again
    assert notices.notify_once(tty) is True


def test_vfl_prints_it_on_its_first_command_only(pinned, monkeypatch, capsys):
    tty = Tty()
    monkeypatch.setattr(notices.sys, "stderr", tty)
    assert main(["strategies"]) == 0 and main(["strategies"]) == 0
    assert tty.getvalue().count("vfl: note: the psi extra") == 1
