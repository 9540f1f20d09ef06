"""``simulations.benchmarks.llm_memory``: docs/llm-p3eft.md's 7B arithmetic as code, and the benchmark's path
(a random Llama built from a config, the model server's forward and backprop per setting) on a tiny preset."""

from __future__ import annotations

import json

import pytest
import torch

from simulations.benchmarks.llm_memory import main, predicted

GB = 1e9


def test_predicted_matches_the_docs_7b_table():
    """Llama-2-7B (AutoModel, no lm_head): fp32 weights in backprop, LoRA r = 16, 9.85 MB of activations
    per token without checkpointing, 0.83 MB with it; NF4 weights 3.87 GB (docs/llm-p3eft.md)."""
    shape = {"d": 4096, "f": 11008, "layers": 32, "vocab": 32000, "rank": 16, "pieces": 2}
    plain = predicted(**shape, tokens=1, checkpointing=False, quantization="none")
    ckpt = predicted(**shape, tokens=1, checkpointing=True, quantization="none")
    nf4 = predicted(**shape, tokens=0, checkpointing=False, quantization="nf4")
    assert plain["activations"] / 1e6 == pytest.approx(9.85, abs=0.01)
    assert ckpt["activations"] / 1e6 == pytest.approx(0.83, abs=0.01)
    assert plain["lora_slots"] / GB == pytest.approx(0.16, abs=0.005)
    assert plain["weights"] / GB == pytest.approx(26.43, abs=0.01)  # 4 bytes x 6.607e9 (no lm_head)
    assert nf4["weights"] / GB == pytest.approx(3.87, abs=0.01)
    mb8 = predicted(**shape, tokens=8 * 512, checkpointing=False, quantization="none")
    assert mb8["activations"] / GB == pytest.approx(40.3, abs=0.1)


def test_the_tiny_preset_runs_every_phase(tmp_path):
    main(["--out", str(tmp_path), "--preset", "tiny", "--device", "cpu", "--quantization", "none",
          "--settings", "2:on", "2:off", "--seq-len", "8"])
    rows = json.loads((tmp_path / "llm_memory.json").read_text())["rows"]
    assert [r["phase"] for r in rows] == ["built", "loaded", "backprop", "backprop"]
    assert [r["checkpointing"] for r in rows[2:]] == [False, True]  # checkpointing wraps blocks: it comes last
    assert all(r["backprop_peak_gb"] is None and r["backprop_s"] > 0 for r in rows[2:])  # no GPU: no memory column


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_tiny_preset_measures_gpu_memory(tmp_path):
    main(["--out", str(tmp_path), "--preset", "tiny", "--device", "cuda", "--quantization", "none",
          "--settings", "4:off", "--seq-len", "64"])
    row = json.loads((tmp_path / "llm_memory.json").read_text())["rows"][-1]
    assert 0 < row["allocated_before_gb"] <= row["forward_peak_gb"] and row["allocated_before_gb"] < row["backprop_peak_gb"]
