"""``vfl verify`` as a user runs it (issue 47, item 6): a table of printed vs recomputed per key, exit 0 when all
agree, 1 naming what differs; ``--bundle OUT.zip`` and ``vfl verify OUT.zip`` elsewhere (another directory, the
run gone); a run directory from before the hash chain is one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from simulations.cli.main import main
from tests.e2e.test_cli_processes import ENV
from tests.support.helpers import BlobSource
from tests.support.release_runs import tiny_cfg
from tests.support.verify_runs import make_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("verify-cli") / "run"
    make_run(path, tiny_cfg("pbm", train={"epochs": 2}), BlobSource(num_parties=3, num_train=48, num_test=12))
    return path


def _vfl(*args, cwd):
    return subprocess.run([sys.executable, "-m", "simulations.cli.main", *args], env=ENV, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_verify_a_run_then_its_bundle_elsewhere(run, tmp_path, capsys):
    assert main(["verify", str(run), "--bundle", str(tmp_path / "evidence.zip")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["key", "printed", "recomputed"]
    assert any(line.split()[:1] == ["epsilon"] and line.endswith("ok") for line in lines)
    assert lines[-1].startswith("verified: ")
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.move(tmp_path / "evidence.zip", moved / "evidence.zip")
    out = _vfl("verify", "evidence.zip", cwd=moved)  # a process of its own, the run directory not at hand
    assert out.returncode == 0, out.stdout + out.stderr
    assert "not here (a bundle holds no weights)" in out.stdout and out.stdout.splitlines()[-1].startswith("verified: ")


def test_a_tampered_run_exits_1_naming_what_differs(run, tmp_path, capsys):
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    summary = json.loads((bad / "summary.json").read_text())
    summary["epsilon"] /= 2
    (bad / "summary.json").write_text(json.dumps(summary))
    assert main(["verify", str(bad)]) == 1
    out = capsys.readouterr().out
    assert any(line.split()[0] == "epsilon" and line.endswith("DIFFERS") for line in out.splitlines())
    assert out.splitlines()[-1] == f"NOT verified: {bad}: 1 difference(s)"


def test_a_run_from_before_the_chain_is_one_line(run, tmp_path, capsys):
    old = tmp_path / "old"
    shutil.copytree(run, old)
    ledger = old / "privacy_ledger.jsonl"
    ledger.write_text("".join(line + "\n" for line in ledger.read_text().splitlines()[1:]))  # no header
    assert main(["verify", str(old)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"vfl: verify: {old}: privacy_ledger.jsonl has no hash chain")
    assert main(["verify", str(tmp_path)]) == 2  # not a run directory: bad input, one line
    assert capsys.readouterr().err.startswith("vfl: error: RUN_DIR: ")
