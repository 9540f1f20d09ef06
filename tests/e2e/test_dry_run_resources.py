"""``vfl run --dry-run`` checks a local Ray run's actor reservations against this machine (the
check Ray's admission makes at start-up), in one line, without starting Ray or writing anything."""

from __future__ import annotations

import os

import pytest

from simulations.cli.main import main
from vfl.runtime.transport.placement import auto_max_actors


def _dry(capsys: pytest.CaptureFixture[str], *sets: str) -> tuple[int, str]:
    code = main(["run", "demo", "--dry-run", *(a for s in sets for a in ("--set", s))])
    return code, capsys.readouterr().err.strip()


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)


def test_the_demo_fits_two_cores(two_cores: None, capsys: pytest.CaptureFixture[str]) -> None:
    """Control: the demo's reservations (0.25 CPU per actor) fit the machine the README targets."""
    code, err = _dry(capsys)
    assert code == 0 and err.endswith("config OK (dry run: nothing written)")


def test_actors_that_together_need_more_cpus_fail_in_one_line(two_cores: None, capsys, tmp_path) -> None:
    actors = 1 + min(4, auto_max_actors(2))  # the server's actor + the demo's 4 parties packed
    code, err = _dry(capsys, "transport.cpus_per_actor=1")
    assert code == 2 and len(err.splitlines()) == 1
    assert f"{actors} actors need CPU={actors} together" in err and "transport.cpus_per_actor" in err
    assert "CPU=2" in err
    code, err = _dry(capsys, "transport.cpus_per_actor=1", "transport.parties_per_actor=4")  # 2 actors fit
    assert code == 0, err


def test_one_actor_bigger_than_the_machine_names_its_profile_key(two_cores: None, capsys) -> None:
    code, err = _dry(capsys, "transport.resources.server.cpus=3")
    assert code == 2 and len(err.splitlines()) == 1
    assert "actor server needs CPU=3 (transport.resources.server.cpus)" in err


def test_in_process_runs_reserve_nothing_and_are_not_checked(two_cores: None, capsys) -> None:
    code, err = _dry(capsys, "transport.kind=inprocess", "transport.cpus_per_actor=8")
    assert code == 0, err
