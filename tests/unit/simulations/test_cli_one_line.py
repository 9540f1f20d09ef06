"""Every failure of a ``vfl`` command is one ``vfl:`` line (issue 47, items 3 and 5): Ray errors that are not a
task's or an actor's, a config that is not a regular file, ``vfl generate``'s bad arguments; and a hint names
only what the user ran (never ``vfl run --resume`` after ``vfl report``, never ``--resume:`` for ``generate``)."""

from __future__ import annotations

import os
import types

import pytest
import ray

import vfl.engine.api
from simulations.cli.main import main
from vfl.core.errors import ConfigError, PartyFailure, TransportError
from vfl.engine.schema import load_run_config

OOM = ray.exceptions.OutOfMemoryError("Task was killed due to the node running low on memory.\nMemory on the "
                                      "node (IP: 10.0.0.1) was 7.5GB / 7.8GB\n" + "details\n" * 80)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def test_a_ray_error_other_than_a_task_or_actor_error_is_one_line_with_the_resume_hint(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"

    def run(*args, **kwargs):
        out.mkdir()
        (out / "config.resolved.yaml").write_text("name: demo\n")
        raise OOM  # an 87-line OutOfMemoryError under Ray's memory monitor, before

    monkeypatch.setattr(vfl.engine.api, "run", run)
    assert main(["run", "demo", "--transport", "inprocess", "--out", str(out)]) == 1
    line = _one_line(capsys)
    assert line.startswith("vfl: run failed: Ray OutOfMemoryError: Task was killed due to the node running low on")
    assert line.endswith(f"; last checkpoint: none (stopped before the first epoch ended); resume with: vfl run "
                         f"--resume {out}")


def test_the_transport_turns_the_memory_monitor_into_a_party_failure_a_restart_covers():
    """``RayTransport._get``: before, only task, actor and timeout errors became a PartyFailure."""
    from vfl.runtime.transport.ray_transport import RayTransport

    transport = object.__new__(RayTransport)
    actor = types.SimpleNamespace(ready=types.SimpleNamespace(remote=lambda: "alive"))

    def get(ref, timeout=None):
        if ref == "alive":
            return True
        raise OOM

    transport._ray = types.SimpleNamespace(get=get, exceptions=ray.exceptions)
    transport.timeout_s = 5.0
    transport.actors = {"g1": actor}
    transport.groups = {"g1": types.SimpleNamespace(specs=[types.SimpleNamespace(name="party1")])}
    with pytest.raises(PartyFailure) as exc:
        transport._get({"g1": "deliver"}, round="train:0:3")
    assert exc.value.round == "train:0:3" and exc.value.cause.startswith("OutOfMemoryError: Task was killed")


def test_a_sweep_runs_worker_crash_is_one_line():
    from simulations.cli.sweep_ray import _get

    crash = ray.exceptions.WorkerCrashedError()
    fake = types.SimpleNamespace(get=lambda ref: (_ for _ in ()).throw(crash), exceptions=ray.exceptions)
    with pytest.raises(TransportError, match=r"sweep run out/007 failed: WorkerCrashedError: "):
        _get(fake, "ref", "out/007")


def test_a_local_ray_that_does_not_start_is_one_line(monkeypatch):
    """The local ``ray.init`` start-up timeout was a traceback."""
    from vfl.runtime.transport import ray_transport

    class Watcher:
        def watch_descendants(self):
            pass

        def reap_now(self):
            self.reaped = True

    monkeypatch.setattr(ray_transport, "Reaper", Watcher)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)

    def init(**kwargs):
        raise Exception("The current node timed out during startup. This could happen because some of the Ray "
                        "processes failed to startup.\nmore")

    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(TransportError, match=r"^cannot start a local Ray: Exception: The current node timed out "
                                             r"during startup\. .*startup\.$"):
        ray_transport.RayTransport()


def test_an_interrupted_report_suggests_no_vfl_run(tmp_path, monkeypatch, capsys):
    import simulations.report.render as render

    (tmp_path / "config.resolved.yaml").write_text("name: demo\n")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(render, "build_report", interrupted)
    assert main(["report", str(tmp_path)]) == 130
    assert _one_line(capsys) == "vfl: interrupted by SIGINT"  # before: "...; resume with: vfl run --resume ..."


@pytest.mark.parametrize(("args", "line"), [
    (["generate", "nowhere", "--prompt", "hi"], "vfl: error: RUN_DIR: nowhere is not a directory"),
    (["generate", ".", "--prompt", "hi", "--max-new-tokens", "-1"],
     "vfl: error: --max-new-tokens: got -1; allowed: an integer in [1, 4096]")])
def test_generate_names_its_own_arguments(args, line, capsys):
    assert main(args) == 2
    assert _one_line(capsys).startswith(line)


def test_generate_prints_no_loading_bar(tmp_path, monkeypatch, capsys):
    """Hugging Face's loading bars printed after ``vfl generate``'s JSON: off before the model loads."""
    import strategies.ushape as ushape

    seen = {}
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    monkeypatch.setattr(ushape, "generate_from_run", lambda run, prompts, max_new=None: seen.update(
        bars=os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS")) or ["answer"])
    assert main(["generate", str(tmp_path), "--prompt", "q"]) == 0
    assert seen == {"bars": "1"} and '"generation": "answer"' in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_a_config_must_be_a_regular_file_of_bounded_size(tmp_path, kind, capsys):
    """``vfl run /dev/zero`` grew to 8.8 GB, a FIFO hung: the file is checked before it is opened."""
    from simulations.cli import runner

    path = tmp_path / "c.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = "/dev/zero"
    else:
        with open(path, "wb") as f:
            f.truncate(runner.MAX_CONFIG_BYTES + 1)
    assert main(["run", str(path), "--dry-run"]) == 2
    assert _one_line(capsys).startswith(f"vfl: error: CONFIG: {path} is ")


def test_record_max_mb_is_bounded():
    with pytest.raises(ConfigError, match=r"privacy.record_max_mb: got 1e\+308; allowed: a value in \(0, 1048576\]"):
        load_run_config({"privacy": {"record_max_mb": 1e308}})


def test_sighup_is_handled_like_sigterm(tmp_path, monkeypatch, capsys):
    """A closed terminal or a dropped ssh session (SIGHUP) killed the run with no line and no clean-up."""
    import signal

    out = tmp_path / "run"

    def run(*args, **kwargs):
        out.mkdir()
        (out / "config.resolved.yaml").write_text("name: demo\n")
        assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, signal.SIG_IGN)  # before: the default, fatal
        os.kill(os.getpid(), signal.SIGHUP)
        raise AssertionError("SIGHUP did not interrupt the run")

    monkeypatch.setattr(vfl.engine.api, "run", run)
    before = signal.getsignal(signal.SIGHUP)
    assert main(["run", "demo", "--transport", "inprocess", "--out", str(out)]) == 129
    assert _one_line(capsys).startswith("vfl: interrupted by SIGHUP; last checkpoint: none")
    assert signal.getsignal(signal.SIGHUP) == before  # the command's handler is gone after it


# ---- issue 47, item 2: a run directory's damaged files, as the commands that read them say it --------------
@pytest.fixture
def finished(tmp_path):
    """A run directory's files as a finished 2-epoch run leaves them (no engine: written here)."""
    import json

    from tests.support.release_runs import tiny_cfg
    from vfl.engine.rundir import RunDir

    run = RunDir(tmp_path / "run")
    run.write_config(tiny_cfg("pbm", train={"epochs": 2}).to_dict(), note="created by: tests")
    (run.path / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e, "epsilon": 1.0}) + "\n" for e in (0, 1)))
    (run.path / "summary.json").write_text(json.dumps({"epochs": 2, "epsilon": 1.0}))
    return run.path


def test_a_truncated_config_stops_a_resume_in_one_line_without_a_resume_hint(finished, capsys):
    text = (finished / "config.resolved.yaml").read_text()
    (finished / "config.resolved.yaml").write_text(text[:text.index("privacy:")])
    assert main(["run", "--resume", str(finished)]) == 1  # before: exit 0, privacy settings from the defaults
    line = _one_line(capsys)
    assert line.startswith(f"vfl: error: {finished / 'config.resolved.yaml'}: its settings do not match the digest")
    assert "resume with" not in line


@pytest.mark.parametrize(("damage", "needle"), [
    ("summary", "summary.json holds a JSON list"), ("epsilon", "summary.json: epsilon is '1.0'"),
    ("metrics", "metrics.jsonl holds the rows of epochs [1] but")])
def test_vfl_report_names_a_damaged_file_in_one_line(finished, capsys, damage, needle):
    """Before: a traceback, or a string ε printed into report.md as the accountant's bound."""
    if damage == "summary":
        (finished / "summary.json").write_text("[1, 2]")
    elif damage == "epsilon":
        (finished / "summary.json").write_text('{"epochs": 2, "epsilon": "1.0"}')
    else:
        (finished / "metrics.jsonl").write_text('{"epoch": 1, "epsilon": 1.0}\n')
    assert main(["report", str(finished), "--attacks", "audit"]) == 1
    line = _one_line(capsys)
    assert needle in line and "resume" not in line and not (finished / "report.md").exists()


def test_vfl_report_waits_for_no_run_it_is_refused_under_the_runs_lock(finished, capsys):
    from vfl.engine.lock import RunLock

    with RunLock(finished, key="--resume"):  # a run (or another report) is writing the directory
        assert main(["report", str(finished), "--attacks", "audit"]) == 2
    assert _one_line(capsys).startswith(f"vfl: error: RUN_DIR: {finished} is in use by another vfl run (PID ")
