"""Options that contradict each other or mean nothing together (vfl/config/conflicts.py): each is ONE
line refusing it (exit 2, already at --dry-run, nothing written) or ONE warning naming which wins."""

from __future__ import annotations

import os

import pytest
import torch

from simulations.cli.main import main
from vfl.config.conflicts import check_machine
from vfl.engine.schema import load_run_config

CORES = os.cpu_count() or 1
DRY = ["run", "demo", "--dry-run", "--no-progress"]
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")


def _sets(*overrides: str) -> list[str]:
    return [x for o in overrides for x in ("--set", o)]


def _err(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return [x for x in err.strip().splitlines() if x]


REFUSED = [
    (["--transport", "inprocess", *_sets("transport.data_plane=socket")],
     "transport.data_plane: got 'socket' with transport.kind: inprocess (the socket data plane joins Ray actors)"),
    (["--transport", "inprocess", "--address", "127.0.0.1:6379"],
     "transport.address: got '127.0.0.1:6379' with transport.kind: inprocess"),
    (_sets("transport.kind=inprocess", "transport.address=10.0.0.1:6379"),
     "transport.address: got '10.0.0.1:6379' with transport.kind: inprocess"),
    (["--transport", "ray", *_sets("transport.data_plane=socket", "train.on_dropout=skip-party",
                                   "params.secagg_mode=semi-honest")],
     "transport.data_plane: got 'socket' with train.on_dropout: skip-party"),
    (_sets("privacy.target_epsilon=4", "privacy.epsilon_budget=2"),
     "privacy.epsilon_budget: got 2.0 below privacy.target_epsilon 4.0 (the run would stop before its last "
     "epoch); allowed: >= 4.0, or no budget"),
    (_sets("train.threads_per_actor=256"),
     f"train.threads_per_actor: got 256 but this machine has {CORES} CPU cores"),
    (_sets(f"train.threads_per_actor={CORES + 1}"), f"allowed here: 1..{CORES}"),
    (_sets(f"train.driver_threads={CORES + 1}"), f"train.driver_threads: got {CORES + 1} but this machine has"),
    (_sets("train.driver_threads=0"), "train.driver_threads: got 0; allowed: a value in [1, 256]"),
]


@pytest.mark.parametrize("args,needle", REFUSED)
def test_conflicting_options_are_refused_at_dry_run(args, needle, capsys):
    if CORES >= 256 and "256" in needle:
        pytest.skip("this machine has 256 cores")
    assert main([*DRY, *args]) == 2
    (line,) = _err(capsys)
    assert line.startswith("vfl: error: ") and needle in line, line


@NO_CUDA
@pytest.mark.parametrize("key", ["transport.gpus_per_actor", "transport.resources.server.gpus",
                                 "transport.resources.party.gpus"])
def test_gpu_reservation_without_a_gpu_is_refused_before_ray_waits(key, capsys):
    assert main([*DRY, "--transport", "ray", *_sets(f"{key}=1")]) == 2
    (line,) = _err(capsys)
    assert f"{key}: got 1 but this machine has no GPU" in line and "allowed here: 0" in line, line


@NO_CUDA
def test_gpu_reservation_in_process_is_a_warning(capsys):
    assert main([*DRY, "--transport", "inprocess", *_sets("transport.gpus_per_actor=0.5")]) == 0
    warning, ok = _err(capsys)
    assert "transport.gpus_per_actor=0.5 has no effect in-process" in warning and "train.device ('cpu')" in warning
    assert ok == "config OK (dry run: nothing written)"


WINS = [  # (overrides, the key whose given value loses)
    (["privacy.target_epsilon=8"], "beta"),  # demo gives params.beta: 0.25
    (["strategy=ldp", "params={b: 16, sigma: 0.5}", "privacy.target_epsilon=8"], "sigma"),
]


@pytest.mark.parametrize("overrides,key", WINS)
def test_target_epsilon_wins_over_an_explicit_noise_value_with_one_warning(overrides, key, capsys):
    assert main([*DRY, "--transport", "inprocess", *_sets(*overrides)]) == 0
    out = capsys.readouterr()
    lines = [x for x in out.err.strip().splitlines() if "wins" in x]
    assert len(lines) == 1, out.err
    assert f"privacy.target_epsilon=8.0 wins over params.{key}=" in lines[0]
    assert f"the run uses params.{key}=" in lines[0] and "(calibrated)" in lines[0]


def test_control_target_epsilon_alone_and_the_resolved_config_are_quiet(capsys):
    """No warning when params does not give the calibrated key, nor when the given value already is
    the calibrated one (a resumed run reads its resolved config back)."""
    assert main([*DRY, "--transport", "inprocess", *_sets("params={b: 16}", "privacy.target_epsilon=8")]) == 0
    out = capsys.readouterr()
    assert "wins" not in out.err
    import yaml

    resolved = yaml.safe_load(out.out)
    cfg = load_run_config(resolved)  # beta is now in params, equal to the calibration
    assert "wins" not in capsys.readouterr().err and cfg.params.beta == resolved["params"]["beta"]


def test_machine_checks_are_skipped_for_a_cluster():
    cfg = load_run_config({"strategy": "npq", "transport": {"kind": "ray", "address": "10.0.0.1:6379",
                                                          "gpus_per_actor": 1}, "train": {"threads_per_actor": 64}})
    check_machine(cfg, cpus=2, cuda_devices=0)  # the cluster's nodes are not this machine
    local = load_run_config({"strategy": "npq", "transport": {"kind": "ray", "gpus_per_actor": 1}})
    check_machine(local, cpus=2, cuda_devices=1)  # a GPU here: fine
    with pytest.raises(Exception, match="has no GPU"):
        check_machine(local, cpus=2, cuda_devices=0)


def test_an_old_config_asking_for_the_compiled_graph_warns_once_and_runs(capsys):
    """``transport.compiled_graph: on`` (the removed Ray Compiled Graph) is kept for old configs: one warning
    naming the data plane the step takes instead, then the dry run goes through."""
    assert main([*DRY, "--transport", "ray", *_sets("transport.compiled_graph=on")]) == 0
    warnings = [x for x in _err(capsys) if "compiled_graph" in x]
    assert len(warnings) == 1 and "transport.data_plane: ray" in warnings[0] and "socket" in warnings[0]
