"""Run directory invariants: one writer (lock), verified checkpoints (manifest), metrics that never
duplicate or lose an epoch, atomic config with a history."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from vfl.core.errors import ConfigError, PartyFailure, RunDirError, RunFileError
from vfl.engine.checkpoint import CheckpointStore
from vfl.engine.lock import RunLock
from vfl.engine.rundir import RunDir, read_summary, safe_name
from vfl.runtime.host import NodeHost


# ---- lock ------------------------------------------------------------------------------------------
def test_second_writer_is_refused_naming_the_directory_and_pid(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(ConfigError) as exc:
            RunLock(tmp_path, key="--resume").acquire()
        msg = str(exc.value)
        assert msg.startswith("--resume:") and str(tmp_path) in msg and f"PID {os.getpid()}" in msg
    with RunLock(tmp_path):  # released: free again
        pass


def test_create_refuses_runs_files_and_foreign_content(tmp_path):
    run = RunDir.create(tmp_path / "a")
    run.write_config({"name": "x"})
    with pytest.raises(ConfigError, match="in use by another vfl run"):
        RunDir.create(tmp_path / "a")  # still locked by `run`
    run.close()
    with pytest.raises(ConfigError, match="already holds a run; continue it with `vfl run --resume"):
        RunDir.create(tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"is not empty \(notes.txt\)"):
        RunDir.create(tmp_path / "b")
    (tmp_path / "c").mkdir()
    RunDir.create(tmp_path / "c").close()  # an empty directory is fine


def test_safe_name():
    assert safe_name("../../x") == "_.._x"
    assert safe_name("..") == "run" and safe_name("a b/c") == "a_b_c" and safe_name(".hidden") == "hidden"


# ---- checkpoints -------------------------------------------------------------------------------
def _store(tmp_path, warnings):
    return CheckpointStore(tmp_path / "checkpoints", warn=warnings.append)


def _save(store, epoch):
    store.save(epoch, {0: b"server-%d" % epoch, 1: b"p1-%d" % epoch, 2: b"p2-%d" % epoch * 50},
               {"epoch": epoch, "ledger": {}})


@pytest.mark.parametrize("damage,needle", [
    (lambda f: f.write_bytes(f.read_bytes()[:7]), "is truncated (7 of"),
    (lambda f: f.write_bytes(b"X" + f.read_bytes()[1:]), "is corrupt (SHA-256"),
    (lambda f: f.unlink(), "is unreadable"),
])
def test_damaged_latest_checkpoint_falls_back_with_one_warning(tmp_path, damage, needle):
    warnings: list[str] = []
    store = _store(tmp_path, warnings)
    _save(store, 0)
    _save(store, 1)
    damage(tmp_path / "checkpoints" / "epoch_00001" / "node_2.pt")
    ckpt = store.load_latest()
    assert ckpt.epoch == 0 and ckpt.nodes[1] == b"p1-0"
    assert len(warnings) == 1 and "epoch_00001/node_2.pt" in warnings[0] and needle in warnings[0]
    assert "resuming from the intact epoch_00000" in warnings[0]


def test_no_intact_checkpoint_names_the_file(tmp_path):
    store = _store(tmp_path, [])
    _save(store, 0)
    (tmp_path / "checkpoints" / "epoch_00000" / "engine.json").write_text("{}")
    with pytest.raises(RunDirError, match=r"no intact checkpoint .*epoch_00000/engine.json is truncated"):
        store.load_latest()


def test_latest_marker_and_leftovers_are_not_trusted(tmp_path):
    store = _store(tmp_path, [])
    _save(store, 0)
    _save(store, 1)
    _save(store, 2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("epoch_*")) == ["epoch_00001", "epoch_00002"]
    (tmp_path / "checkpoints" / "latest").write_text("")  # an empty marker
    (tmp_path / "checkpoints" / ".tmp_epoch_00003").mkdir()  # a run killed mid-checkpoint
    assert store.load_latest().epoch == 2
    manifest = json.loads((tmp_path / "checkpoints" / "epoch_00002" / "manifest.json").read_text())
    assert manifest["files"]["node_1.pt"]["bytes"] == len(b"p1-2") and len(manifest["files"]["node_1.pt"]["sha256"]) == 64


def test_disk_full_names_the_file_and_leaves_no_partial_checkpoint(tmp_path, monkeypatch):
    store = _store(tmp_path, [])
    _save(store, 0)

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(RunDirError, match=r"cannot write .*\.tmp_epoch_00001/node_0.pt: No space left on device"):
        _save(store, 1)
    monkeypatch.undo()
    assert [p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith((".tmp", "epoch"))] == [
        "epoch_00000"]
    assert store.load_latest().epoch == 0


# ---- metrics -----------------------------------------------------------------------------------
def test_partial_last_metrics_line_is_ignored_but_a_corrupt_middle_line_is_named(tmp_path):
    run = RunDir(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"epoch": 0}\n{"epoch": 1}\n{"epo')
    assert [r["epoch"] for r in run.read_metrics()] == [0, 1]
    (tmp_path / "metrics.jsonl").write_text('{"epoch": 0}\ngarbage\n{"epoch": 2}\n')
    with pytest.raises(RunDirError, match="metrics.jsonl line 2 is not a metrics row"):
        run.read_metrics()


def test_reconcile_keeps_exactly_the_checkpointed_epochs(tmp_path):
    run = RunDir(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e, "v": i}) + "\n"
                                                    for i, e in enumerate([0, 0, 1, 2, 3])))
    run.save_checkpoint(2, {0: b"s"}, {"epoch": 2, "ledger": {}, "record": {"epoch": 2, "v": 3}})
    rows = run.reconcile_metrics(run.load_checkpoint())
    assert [(r["epoch"], r["v"]) for r in rows] == [(0, 1), (1, 2), (2, 3)]  # dup dropped, 3 past the ckpt
    assert run.read_metrics() == rows
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e}) + "\n" for e in (0, 1)))  # died before row 2
    rows = run.reconcile_metrics(run.load_checkpoint())
    assert [r["epoch"] for r in rows] == [0, 1, 2]  # the checkpoint carries its row
    assert run.reconcile_metrics(None) == [] and run.read_metrics() == []


@pytest.mark.parametrize("history", [True, False], ids=["checkpoint_with_rows", "older_checkpoint"])
def test_a_deleted_metrics_file_is_rebuilt_whole_or_refused(tmp_path, history):
    """Issue 47, item 2: metrics.jsonl deleted after 3 epochs. Before, a resume restored only the checkpoint's
    own row (epochs 0 and 1 lost while summary.json went on to claim them). A checkpoint now carries every
    committed row and rebuilds the file whole; one from an older version cannot, and says so in one line."""
    run = RunDir(tmp_path)
    rows = [{"epoch": e, "v": e * 10} for e in range(3)]
    engine = {"epoch": 2, "ledger": {}, "record": rows[2], **({"history": rows} if history else {})}
    run.save_checkpoint(2, {0: b"s"}, engine)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run.reconcile_metrics(run.load_checkpoint()) == rows  # control: nothing lost, nothing changes
    (tmp_path / "metrics.jsonl").unlink()
    if history:
        assert run.reconcile_metrics(run.load_checkpoint()) == rows and run.read_metrics() == rows
    else:
        with pytest.raises(RunFileError, match=r"metrics.jsonl lacks the rows of epochs \[0, 1\] that checkpoint "
                                               "epoch_00002 committed"):
            run.reconcile_metrics(run.load_checkpoint())


def test_a_truncated_config_is_refused_never_filled_with_defaults(tmp_path):
    """Issue 47, item 2: a config.resolved.yaml cut short read back as a smaller mapping, and a resume filled the
    missing keys with defaults (noise_rng: seeded became crypto). Its digest now refuses it in one line."""
    run = RunDir(tmp_path)
    run.write_config({"train": {"epochs": 2}, "privacy": {"noise_rng": "seeded"}, "params": {"secagg_mode": "announced"}})
    assert run.read_config()["privacy"] == {"noise_rng": "seeded"}  # control: as written
    text = (tmp_path / "config.resolved.yaml").read_text()
    (tmp_path / "config.resolved.yaml").write_text(text[:text.index("privacy:")])
    with pytest.raises(RunFileError, match=r"config.resolved.yaml: its settings do not match the digest it was "
                                           r"written with .*truncated or edited"):
        run.read_config()
    (tmp_path / "config.resolved.yaml").write_text(text.replace("announced", "semi-honest"))
    with pytest.raises(RunFileError, match="truncated or edited"):
        run.read_config()


@pytest.mark.parametrize(("text", "needle"), [
    ('{"epsilon": 12.5, "epochs"', "is not valid JSON"), ("[1, 2]", "holds a JSON list, not the summary object"),
    ('{"epsilon": "12.5"}', "epsilon is '12.5'; a run writes a number or null there"),
    ('{"epsilon": true}', "epsilon is True")])
def test_a_damaged_summary_is_one_line_naming_it(tmp_path, text, needle):
    (tmp_path / "summary.json").write_text(text)
    with pytest.raises(RunFileError, match=needle):
        read_summary(tmp_path / "summary.json")
    (tmp_path / "summary.json").write_text('{"epsilon": 12.5, "epsilon_scope": "x", "restarts": []}')
    assert read_summary(tmp_path / "summary.json")["epsilon"] == 12.5  # control


def test_config_is_written_atomically_with_a_history(tmp_path):
    run = RunDir(tmp_path)
    run.write_config({"train": {"epochs": 2}}, note="created by: vfl run demo")
    run.write_config({"train": {"epochs": 5}}, note="resumed with train.epochs=5")
    assert run.read_config() == {"train": {"epochs": 5}}
    hist = run.config_history()
    assert len(hist) == 2 and hist[0].endswith("created by: vfl run demo") and hist[1].endswith("train.epochs=5")
    assert not list(tmp_path.glob(".*.tmp"))
    (tmp_path / "config.resolved.yaml").write_text("a: 1\na: 2\n")
    with pytest.raises(ConfigError, match="duplicate key"):
        run.read_config()


# ---- errors cross process boundaries -----------------------------------------------------------
def test_typed_errors_survive_pickling():
    for exc in (ConfigError("train.lr", "bad"), PartyFailure("party1", "train:1:2", "died")):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc)
    assert pickle.loads(pickle.dumps(ConfigError("k", "m"))).key == "k"


def test_a_host_reports_a_build_error_from_ready():
    def build(specs):
        raise ConfigError("train.device", "no CUDA here")

    host = NodeHost(build, [])
    with pytest.raises(ConfigError, match="train.device"):
        host.ready()
