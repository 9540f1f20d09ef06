"""Limits checked at config time (``--dry-run`` included), before a run spends hours: ``params.b``
is bounded by what the exact PBM accountant computes in minutes (its cost grows with b)."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from simulations.cli.main import main
from strategies.pbm import MAX_B
from vfl.core.errors import ConfigError
from vfl.engine.schema import load_run_config


def test_params_b_beyond_the_accountants_reach_is_refused_naming_the_key():
    assert load_run_config({"strategy": "pbm", "params": {"b": MAX_B}}).params.b == MAX_B
    with pytest.raises(ConfigError, match=r"params\.b.*\[1, 65536\]"):
        load_run_config({"strategy": "pbm", "params": {"b": 1 << 20}})


def test_dry_run_refuses_it_in_one_line(capsys):
    assert main(["run", "demo", "--dry-run", "--set", "params.b=1048576"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "params.b" in err[0]
