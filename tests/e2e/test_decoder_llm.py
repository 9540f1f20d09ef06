"""End to end with decoders: ``sap`` and the P3EFT family run one epoch through the runner (engine,
in-process transport, run directory) against a tiny GPT-2, and a tiny Llama saved in bfloat16."""

from __future__ import annotations

import json

import pytest

from parties.llm.common.tiny import tiny_gpt2_dir
from simulations.cli.runner import execute, resolve_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    return tiny_gpt2_dir(tmp_path_factory.mktemp("tiny-gpt2"))


def run(strategy: str, model_dir: str, out, **params):
    """Packaged Rotten Tomatoes sentences, 32 train / 16 test, one epoch of two steps."""
    raw = {"name": f"{strategy}-gpt2", "strategy": strategy, "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
           "data": {"train_subsample": 32, "test_subsample": 16},
           "train": {"epochs": 1, "batch_size": 16, "optimizer": "adam", "lr": 1e-3},
           "params": {"max_len": 16, "model_dir": model_dir, **params}}
    result = execute(resolve_config(raw), out_dir=out, progress=False)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["strategy"] == strategy and 0.0 <= summary["test_acc"] <= 1.0
    assert result.summary["test_acc"] == summary["test_acc"]
    return summary


@pytest.mark.parametrize("frozen", [True, False])
def test_sap_runs_with_a_decoder(gpt2_dir, tmp_path, frozen):
    s = run("sap", gpt2_dir, tmp_path, split=1, frozen_bottom=frozen, eta=100.0, eia_samples=2, eia_steps=5,
            lora_rank=2)
    kinds = s["bytes_by_kind"]
    assert kinds["train.reps"]["direction"] == "up" and kinds["train.logits"]["direction"] == "down"
    assert ("train.bottom_grad" in kinds) is (not frozen)  # a trainable bottom gets dLoss/dh back
    assert s["eia_rate"] is not None and 0.0 <= s["ep_eia"] <= 1.0


def test_sap_eia_uses_the_decoder_embedding_table(gpt2_dir, tmp_path):
    """Split 0 without privatization: the vendor's nearest-neighbour inversion against GPT-2's ``wte``
    recovers every token (it would recover ~none with a wrong table); strong dχ noise defeats it."""
    clear = run("sap", gpt2_dir, tmp_path / "clear", split=0, eta=None, eia_samples=4, lora_rank=2)
    assert clear["eia_rate"] == 1.0
    noisy = run("sap", gpt2_dir, tmp_path / "noisy", split=0, eta=1.0, snap=False, eia_samples=4, lora_rank=2)
    assert noisy["eia_rate"] < 0.5


@pytest.mark.parametrize(("strategy", "params"), [("p3eft", {"lora_rank": 2, "alpha": 1.0}),
                                                  ("split-lora", {"lora_rank": 2})])
def test_p3eft_family_runs_with_a_decoder(gpt2_dir, tmp_path, strategy, params):
    s = run(strategy, gpt2_dir, tmp_path, leak_window=16, **params)
    kinds = s["bytes_by_kind"]
    n, servers = (2, 2) if strategy == "p3eft" else (1, 1)
    assert kinds["train.forward"]["messages"] == 2 * n and kinds["train.backprop"]["messages"] == 2 * n * servers
    assert 0.5 <= s["leak"] <= 1.0


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_bf16_llama_checkpoint_runs_sap_and_p3eft(tmp_path, dtype, tiny_lm):
    """A rotary decoder saved in bfloat16 (what modern checkpoints ship): sap (trainable bottom, the
    bottom shipped upcast to float32) and p3eft (two servers, private backprop in float32) run a
    step with the frozen weights in ``params.dtype``."""
    path = tiny_lm("llama", dtype="bfloat16")
    s = run("sap", path, tmp_path / "sap", split=1, frozen_bottom=False, eta=100.0, eia_samples=2, eia_steps=5,
            lora_rank=2, dtype=dtype)
    assert "train.bottom_grad" in s["bytes_by_kind"] and 0.0 <= s["ep_eia"] <= 1.0
    s = run("p3eft", path, tmp_path / "p3eft", lora_rank=2, alpha=1.0, leak_window=16, dtype=dtype)
    assert s["bytes_by_kind"]["train.backprop"]["messages"] == 2 * 2 * 2 and 0.5 <= s["leak"] <= 1.0


def test_an_unadapted_family_is_one_config_error(tmp_path):
    """A layout without an adapter (BLOOM: ALiBi positions, ``word_embeddings``/``h``) is refused
    before anything runs, naming params.model_dir and the supported layouts."""
    import torch
    from transformers import BloomConfig, BloomModel

    from vfl.core.errors import ConfigError

    tiny_gpt2_dir(tmp_path / "tok")  # for its tokenizer files
    with torch.random.fork_rng():
        torch.manual_seed(0)
        BloomModel(BloomConfig(vocab_size=400, hidden_size=16, n_layer=1, n_head=2)).save_pretrained(tmp_path / "bloom")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "bloom" / name).write_text((tmp_path / "tok" / name).read_text())
    for strategy in ("sap", "p3eft"):
        with pytest.raises(ConfigError, match=r"params\.model_dir.*rotary decoder"):
            run(strategy, str(tmp_path / "bloom"), tmp_path / strategy)


def test_cli_runs_a_bundled_config_on_a_decoder_by_setting_model_dir(gpt2_dir, tmp_path, capsys):
    """The bundled ``sap-rt`` (BERT numbers) with only ``params.model_dir`` changed: the LoRA targets
    and pooling follow the model family."""
    from simulations.cli.main import main

    rc = main(["run", "sap-rt", "--out", str(tmp_path), "--no-progress", "--set", f"params.model_dir={gpt2_dir}",
               "--set", "train.epochs=1", "--set", "data.train_subsample=32", "--set", "data.test_subsample=16",
               "--set", "params.max_len=16", "--set", "params.eia_samples=2"])
    assert rc == 0, capsys.readouterr()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["strategy"] == "sap" and summary["eia_rate"] is not None
    assert f"model_dir: {gpt2_dir}" in (tmp_path / "config.resolved.yaml").read_text()
