"""Someone else's run directory is untrusted input: a config naming code to import (``pkg.mod:attr``)
is refused by --resume / --dry-run / report unless this user created the directory here or says
--trust-code. The attack: a crafted run directory whose ``model.bottom`` names a module that runs
code on import."""

from __future__ import annotations

import shutil
import textwrap

import pytest
import yaml

from simulations.cli.main import main
from vfl.core.errors import ConfigError
from vfl.engine.rundir import CONFIG, RunDir
from vfl.engine.trust import ORIGIN, created_here, import_strings

EVIL = "vfl_evil_payload_for_tests"


def _crafted(tmp_path, monkeypatch):
    """A run directory from elsewhere whose config imports a module that leaves a mark when run."""
    pkg = tmp_path / "site"
    pkg.mkdir()
    mark = tmp_path / "code-ran"
    (pkg / f"{EVIL}.py").write_text(textwrap.dedent(f"""
        open({str(mark)!r}, "w").write("pwned")
        def Bottom(*, input_shape, embed_dim):
            raise RuntimeError("never built")
    """))
    monkeypatch.syspath_prepend(str(pkg))
    run = tmp_path / "downloaded-run"
    run.mkdir()
    cfg = {"name": "x", "strategy": "npq", "num_parties": 2, "model": {"bottom": f"{EVIL}:Bottom"}}
    (run / CONFIG).write_text(yaml.safe_dump(cfg))
    return run, mark


def test_dry_run_on_a_crafted_run_directory_does_not_run_its_code(tmp_path, monkeypatch, capsys):
    run, mark = _crafted(tmp_path, monkeypatch)
    assert main(["run", "--dry-run", str(run / CONFIG)]) != 0
    err = capsys.readouterr().err
    assert "--trust-code" in err and "model.bottom" in err and len(err.strip().splitlines()) == 1
    assert not mark.exists()
    # The control: the same command trusting it imports the module, i.e. runs its code.
    main(["run", "--dry-run", "--trust-code", str(run / CONFIG)])
    assert mark.read_text() == "pwned"


@pytest.mark.parametrize("command", [["run", "--resume"], ["report"]])
def test_resume_and_report_refuse_a_crafted_directory(tmp_path, monkeypatch, capsys, command):
    run, mark = _crafted(tmp_path, monkeypatch)
    assert main([*command, str(run)]) != 0
    assert "--trust-code" in capsys.readouterr().err
    assert not mark.exists()


def test_a_directory_created_here_is_trusted_and_a_copy_or_a_forged_token_is_not(tmp_path):
    made = RunDir.create(tmp_path / "mine")
    made.write_config({"model": {"bottom": "tests.support.byo_models:TinyBottom"}})
    made.close()
    assert created_here(tmp_path / "mine")
    assert RunDir(tmp_path / "mine").read_config()["model"]["bottom"] == "tests.support.byo_models:TinyBottom"
    shutil.copytree(tmp_path / "mine", tmp_path / "copy")  # .vfl-origin copied along: path differs
    assert not created_here(tmp_path / "copy")
    with pytest.raises(ConfigError, match="--trust-code"):
        RunDir(tmp_path / "copy").read_config()
    (tmp_path / "mine" / ORIGIN).write_text("0" * 32)  # a forged token
    assert not created_here(tmp_path / "mine")


def test_a_config_without_import_strings_needs_no_trust(tmp_path):
    (tmp_path / CONFIG).write_text(yaml.safe_dump({"strategy": "npq", "model": {"bottom": "mlp"}}))
    assert RunDir(tmp_path).read_config()["strategy"] == "npq"


def test_import_strings_are_found_anywhere_in_the_config():
    cfg = {"model": {"bottom": "a.b:C"}, "data": {"parties": [{"path": "x.csv"}, {"loader": "m:f"}]},
           "name": "demo", "note": "ratio 1:2"}
    assert list(import_strings(cfg)) == [("model.bottom", "a.b:C"), ("data.parties[1].loader", "m:f")]
