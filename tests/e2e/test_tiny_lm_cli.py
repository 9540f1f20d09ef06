"""As a user would, in real processes: ``vfl tiny-lm granite DIR`` makes a tiny Granite offline and ``vfl run
sap-rt --set params.model_dir=DIR`` trains on it (SAP's start-up self-check passes: Granite's embedding
multiplier is applied); a directory that already holds a model and an unknown family are refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0",
           HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
SHORT = ["--transport", "inprocess", "--no-progress", "--set", "data.train_subsample=32", "--set",
         "data.test_subsample=16", "--set", "train.epochs=1", "--set", "params.max_len=16", "--set", "params.split=1",
         "--set", "params.eia_samples=2", "--set", "params.eia_steps=3"]


def _vfl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulations.cli.main", *args], env=ENV, capture_output=True,
                          text=True, timeout=600)


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("vfl: error:")]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    return lines[0]


def test_tiny_lm_then_a_sap_run(tmp_path):
    model = tmp_path / "granite"
    made = _vfl("tiny-lm", "granite", str(model))
    assert made.returncode == 0 and made.stdout.strip().splitlines()[-1] == str(model), made.stderr[-2000:]
    assert json.loads((model / "config.json").read_text())["model_type"] == "granite"
    run = _vfl("run", "sap-rt", "--out", str(tmp_path / "run"), "--set", f"params.model_dir={model}", *SHORT)
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["strategy"] == "sap" and 0.0 <= summary["test_acc"] <= 1.0
    assert "already holds a model" in _error_line(_vfl("tiny-lm", "llama", str(model)))
    assert "FAMILY: got 'nope'; allowed: " in _error_line(_vfl("tiny-lm", "nope", str(tmp_path / "x")))


def test_a_family_the_split_runs_wrongly_is_refused_in_one_line(tmp_path, monkeypatch):
    """A bidirectional Gemma 3 (EmbeddingGemma's layout): SAP's split is off on the probe, so ``vfl run``
    exits 2 before any run directory is written, with one line naming ``params.model_dir``."""
    from parties.llm.common.tiny import FAMILIES, tiny_lm_dir

    monkeypatch.setitem(FAMILIES, "gemma3-bi", ("Gemma3TextConfig", {**FAMILIES["gemma3"][1],
                                                                     "use_bidirectional_attention": True}))
    model = tiny_lm_dir(tmp_path / "gemma3-bi", "gemma3-bi")
    line = _error_line(_vfl("run", "sap-rt", "--out", str(tmp_path / "run"), "--set", f"params.model_dir={model}",
                            *SHORT))
    assert line.startswith(f"vfl: error: params.model_dir: {model}: SAP's split at block 1 differs from the "
                           "model's own forward on a probe input by ") and "refused" in line
    assert not (tmp_path / "run").exists()
