"""``params.gradient_checkpointing`` through the runner: split-lora's run with checkpointed model servers
(and micro-batches) equals the plain run, p3eft runs on a bf16 Llama with it, a non-boolean is refused."""

from __future__ import annotations

import pytest

from tests.e2e.test_decoder_llm import run
from vfl.core.errors import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def llama_dir(tiny_lm):
    return tiny_lm("llama", dtype="bfloat16")


def test_split_lora_with_checkpointing_equals_the_plain_run(llama_dir, tmp_path):
    plain = run("split-lora", llama_dir, tmp_path / "plain", lora_rank=2, leak_window=16)
    ckpt = run("split-lora", llama_dir, tmp_path / "ckpt", lora_rank=2, leak_window=16,
               gradient_checkpointing=True, micro_batch=5)
    for key in ("final_train_loss", "test_acc", "test_f1", "leak_theta"):
        assert ckpt[key] == pytest.approx(plain[key], rel=1e-4, abs=1e-6), key


def test_p3eft_runs_with_checkpointing_in_bf16(llama_dir, tmp_path):
    s = run("p3eft", llama_dir, tmp_path, lora_rank=2, alpha=1.0, leak_window=16, dtype="bf16",
            gradient_checkpointing=True, micro_batch=8)
    assert s["bytes_by_kind"]["train.backprop"]["messages"] == 2 * 2 * 2


def test_non_boolean_is_refused(llama_dir, tmp_path):
    with pytest.raises(ConfigError, match="gradient_checkpointing"):
        run("p3eft", llama_dir, tmp_path, gradient_checkpointing="yes")


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_p3eft_with_checkpointing_on_cuda(llama_dir, tmp_path):
    """The checkpointed, micro-batched, batched-VJP model server on a GPU in bf16 (float32 VJPs)."""
    from tests.e2e.test_llm_gpu import _run  # train.device: cuda, params.dtype: bf16

    s = _run("p3eft", llama_dir, tmp_path, alpha=1.0, leak_window=16, gradient_checkpointing=True, micro_batch=8)
    assert s["bytes_by_kind"]["train.backprop"]["messages"] == 2 * 2 * 2
