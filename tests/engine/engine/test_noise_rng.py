"""privacy.noise_rng end to end: crypto noise differs between runs of one seed while init and batch
order repeat; seeded runs repeat bit for bit; no noise key reaches a wire, a checkpoint or a file;
what the run reports (metrics, summary.json, the CLI warning)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from parties.vertical.party import PassiveParty
from tests.support.helpers import BlobSource
from tests.support.noise_capture import run_and_capture, vertical_config
from vfl.core.rng import NoiseSource
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.runtime import message as wire
from vfl.runtime.node import state_to_bytes
from vfl.runtime.transport.inprocess import InProcessTransport

CASES = [("ldp", {}), ("pbm", {"secagg": False, "b": 16})]


def _arrays(m) -> list[np.ndarray]:
    return [wire.from_array(a) for a in m.content.array_records["emb"].values()]


@pytest.mark.parametrize(("strategy", "params"), CASES)
def test_crypto_noise_differs_between_runs_of_one_seed_but_init_and_order_repeat(strategy, params):
    a = run_and_capture(vertical_config(strategy, "crypto", params=params))
    b = run_and_capture(vertical_config(strategy, "crypto", params=params))
    assert a.order == b.order and len(a.order) > 0  # batch order: seeded
    first = [k for k in a.truth if k[1:] == ("train", 0, 0)]
    assert len(first) == 3
    for k in first:  # model init + first batch: seeded, so the clean embeddings are identical
        np.testing.assert_array_equal(a.truth[k], b.truth[k])
    assert set(a.received) == set(b.received)
    for k in a.received:  # ...but every noisy release differs
        assert not any(np.array_equal(x, y) for x, y in zip(_arrays(a.received[k]), _arrays(b.received[k]),
                                                              strict=True)), k
    assert a.result.summary["noise_rng"] == "crypto" and a.result.summary["epsilon_is_guarantee"] is True


@pytest.mark.parametrize(("strategy", "params"), CASES)
def test_seeded_runs_are_bit_identical(strategy, params):
    a = run_and_capture(vertical_config(strategy, "seeded", params=params))
    b = run_and_capture(vertical_config(strategy, "seeded", params=params))
    assert set(a.received) == set(b.received) and len(a.received) > 0
    for k in a.received:
        for x, y in zip(_arrays(a.received[k]), _arrays(b.received[k]), strict=True):
            np.testing.assert_array_equal(x, y)
    for key in ("final_train_loss", "final_test_acc", "epsilon", "total_bytes_up"):
        assert a.result.summary[key] == b.result.summary[key], key
    assert a.result.summary["noise_rng"] == "seeded" and a.result.summary["epsilon_is_guarantee"] is False


def test_no_noise_key_in_any_wire_state_checkpoint_or_file(tmp_path):
    """Every crypto key a node drew: never on a wire, in a node's state(), a checkpoint or a run file."""
    keys: list[bytes] = []
    blobs: list[bytes] = []
    real_init, real_encode = NoiseSource.__init__, wire.encode

    def init(self, key, *, reproducible):
        if not reproducible:
            keys.append(bytes(key))
        real_init(self, key, reproducible=reproducible)

    def encode(message):
        data = real_encode(message)
        blobs.append(data)
        return data

    run_dir = RunDir(tmp_path / "run")
    cfg = vertical_config("pbm", "crypto", params={"b": 16}, epochs=2)  # with SecAgg: the paper's algorithm
    run_dir.write_config(cfg.to_dict())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(NoiseSource, "__init__", init)
        mp.setattr(wire, "encode", encode)
        cap = run_and_capture(cfg, run_dir=run_dir)
    parties = [n for n in cap.nodes().values() if isinstance(n, PassiveParty)]
    assert len(keys) == len(parties) == 3  # one source per noising node, built inside its host
    assert len(set(keys)) == 3 and len(blobs) > 20
    blobs += [state_to_bytes(n.state()) for n in cap.nodes().values()]
    blobs += [p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()]
    for key in keys:
        for half in (key[:16], key[16:]):  # not even half a key
            assert not any(half in blob for blob in blobs)
    for node in parties:  # the source travels nowhere: a node holding one cannot even be pickled
        with pytest.raises(TypeError, match="secret key"):
            pickle.dumps(node.node_noise)
    assert not any("noise" in k for n in cap.nodes().values() for k in n.state())


def test_metrics_lines_and_summary_carry_noise_rng(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    cfg = vertical_config("ldp", "seeded", epochs=2)
    run_dir.write_config(cfg.to_dict())
    run_and_capture(cfg, run_dir=run_dir)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if x.strip()]
    assert len(lines) == 2 and all(r["epsilon"] is not None and r["noise_rng"] == "seeded" for r in lines)
    npq = run_and_capture(vertical_config("npq", "crypto"))
    assert npq.result.summary["noise_rng"] == "crypto" and "epsilon_is_guarantee" not in npq.result.summary
    assert all("epsilon" not in r for r in npq.result.history)


def test_cli_warns_once_for_seeded_accounted_runs(tmp_path, capsys):
    from simulations.cli.main import main

    fast = ["--transport", "inprocess", "--no-progress", "--set", "train.epochs=1", "--set", "params.b=8",
            "--set", "data.train_subsample=256", "--set", "data.test_subsample=128"]
    assert main(["run", "demo", "--out", str(tmp_path / "seeded"), *fast, "--set", "privacy.noise_rng=seeded"]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == ["vfl: warning: privacy.noise_rng=seeded: the noise is reproducible from the run seed, "
                        "so the reported epsilon is not a privacy guarantee"]
    s = json.loads((tmp_path / "seeded" / "summary.json").read_text())
    assert s["noise_rng"] == "seeded" and s["epsilon_is_guarantee"] is False
    assert main(["run", "demo", "--out", str(tmp_path / "crypto"), *fast]) == 0
    assert "warning" not in capsys.readouterr().err
    s = json.loads((tmp_path / "crypto" / "summary.json").read_text())
    assert s["noise_rng"] == "crypto" and s["epsilon_is_guarantee"] is True


class _Killed(Exception):
    pass


def test_seeded_noise_replays_exactly_after_resume(tmp_path):
    """Seeded noise is a pure function of (seed, purpose, node, round): a resumed LDP run ends
    exactly where the uninterrupted one ends."""
    cfg = vertical_config("ldp", "seeded", epochs=3)

    def run(path, *, resume=False, kill_after=None):
        def cb(epoch, record, engine):
            if epoch == kill_after:
                raise _Killed()

        run_dir = RunDir(path)
        if not resume:
            run_dir.write_config(cfg.to_dict())
        return Engine(cfg, InProcessTransport(), BlobSource(num_parties=3), run_dir=run_dir, progress=False,
                      on_epoch_end=cb).run(resume=resume)

    full = run(tmp_path / "full")
    with pytest.raises(_Killed):
        run(tmp_path / "cut", kill_after=0)
    resumed = run(tmp_path / "cut", resume=True)
    for key in ("final_train_loss", "final_test_acc", "epsilon"):
        assert resumed.summary[key] == full.summary[key], key
