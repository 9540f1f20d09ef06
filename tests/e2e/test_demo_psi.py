"""`vfl run demo-psi`: the demo through per-party files (80 % overlap, shuffled), PSI and signed
messages — the same training as `demo` on the intersection, with the PSI and signature bytes shown."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from simulations.cli.main import main
from simulations.cli.runner import resolve_config
from tests.support.party_data import joined
from vfl.engine.engine import Engine
from vfl.runtime.auth import MAC_RECORD_BYTES, SIGNATURE_RECORD_BYTES
from vfl.runtime.transport.inprocess import InProcessTransport

SHORT = ["train.epochs=3", "privacy.noise_rng=seeded"]


def _cache() -> Path:
    (d,) = (Path(os.environ["VFL_CACHE_DIR"]) / "split_parties").glob("digits-m4-o0.8-s0-*")
    return d


def test_demo_psi_trains_like_demo_on_the_intersection(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VFL_CACHE_DIR", str(tmp_path / "cache"))  # its own: other runs of a worker split the digits too
    out = tmp_path / "run"
    argv = ["run", "demo-psi", "--out", str(out), "--transport", "inprocess", "--no-progress"]
    assert main([*argv, *(x for o in [*SHORT, "privacy.record_views=true"] for x in ("--set", o))]) == 0
    printed = json.loads(next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("{")))
    s = json.loads((out / "summary.json").read_text())
    assert printed["psi_intersection_size"] == s["psi_intersection_size"] == round(0.8 * 1797)
    assert s["psi_set_sizes"]["label_holder"] > s["psi_intersection_size"]
    assert s["auth"] is True and s["signature_bytes"] > 0 and s["psi_bytes"] > 0 and s["secagg_setup_bytes"] > 0
    assert s["setup_bytes"] == s["psi_bytes"] + s["secagg_setup_bytes"]
    n = sum(v["messages"] for v in s["bytes_by_kind"].values())  # a MAC record per unicast, a signature per broadcast
    assert MAC_RECORD_BYTES * n < s["signature_bytes"] < SIGNATURE_RECORD_BYTES * n
    assert (s["signature_bytes"] - MAC_RECORD_BYTES * n) % (SIGNATURE_RECORD_BYTES - MAC_RECORD_BYTES) == 0
    # `demo` on the same samples, joined by an omniscient observer: the same run, step for step
    cfg = resolve_config("demo", SHORT, transport="inprocess")
    ref = Engine(cfg, InProcessTransport(), joined(_cache(), 4), progress=False).run()
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["train_loss"] for r in lines] == pytest.approx([h["train_loss"] for h in ref.history], rel=1e-6)
    assert s["final_test_acc"] == ref.summary["final_test_acc"]
    # `vfl report` scores its attacks on the rows the run aligned (it read the registered set before)
    from simulations.report.run import load_run

    shards, labels = load_run(out).parts
    j_shards, j_labels = joined(_cache(), 4).partition()
    assert np.array_equal(labels.y_train, j_labels.y_train) and np.array_equal(labels.y_test, j_labels.y_test)
    assert all(np.array_equal(a.x_train, b.x_train) for a, b in zip(shards, j_shards, strict=True))
    capsys.readouterr()
    assert main(["report", str(out), "--attacks", "label_inference", "--no-progress"]) == 0
    (attack,) = json.loads((out / "report.json").read_text())["attacks"]
    assert attack["name"] == "label_inference" and attack["value"] > attack["baseline"]


def _broken_config(tmp_path) -> Path:
    from simulations.data.split_parties import main as split

    assert split(["digits", str(tmp_path / "files"), "--parties", "2"]) == 0
    cfg = (tmp_path / "files" / "config.yaml").read_text().replace("path: party1.csv", "path: gone.csv")
    (tmp_path / "bad.yaml").write_text(cfg)
    return tmp_path / "bad.yaml"


def test_a_bad_party_file_is_one_line_and_exit_2(tmp_path, capsys):
    bad = _broken_config(tmp_path)
    assert main(["run", str(bad), "--transport", "inprocess", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("vfl: error: ") and "gone.csv: file not found" in err
    assert "data.parties[1].path" in err




def test_demo_psi_without_the_psi_extra_is_one_line_before_any_node_starts(tmp_path, capsys, monkeypatch):
    """openmined-psi is the optional ``psi`` extra: without it `vfl run demo-psi` stops with one line
    naming the extra and a command that works from a clone, and leaves no run directory."""
    import sys

    for name in [n for n in sys.modules if n.startswith("private_set_intersection")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "private_set_intersection", None)  # importing it raises ImportError
    monkeypatch.setitem(sys.modules, "private_set_intersection.python", None)
    monkeypatch.setenv("VFL_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    assert main(["run", "demo-psi", "--out", str(out), "--transport", "inprocess", "--no-progress"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err == ["vfl: error: data.parties: per-party files are aligned by private set intersection, which needs "
                   "the optional 'psi' extra (openmined-psi): pip install -e '.[psi]' (in the repository's folder)"]
    assert not out.exists()
