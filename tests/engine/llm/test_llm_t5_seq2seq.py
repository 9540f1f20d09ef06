"""T5 as an encoder-decoder on the model servers (``params.t5_stack: encoder-decoder``, P3EFT's Flan-T5): the tests through in-process engine runs."""

from __future__ import annotations

import math

import pytest

import strategies  # noqa: F401
from parties.llm.common.backbone import load_encoder
from parties.llm.common.tiny import tiny_gpt2_dir
from parties.llm.p3eft.server import ModelServer
from tests.engine.llm.test_sap_nodes import ToySentiment
from tests.unit.llm.test_llm_t5_seq2seq import ED  # noqa: F401
from vfl.core.errors import ConfigError
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _config(strategy, path, **params):
    base = {"max_len": 16, "lora_rank": 2, "leak_window": 16, "model_dir": path, "t5_stack": ED}
    return load_run_config({"strategy": strategy, "num_parties": 1, "seed": 3,
                            "train": {"epochs": 1, "batch_size": 16, "optimizer": "adam", "lr": 1e-2},
                            "params": {**base, **params}})


@pytest.mark.parametrize("strategy,params", [("p3eft", {"alpha": 1.0}), ("p3eft", {"dtype": "bf16"}),
                                             ("split-lora", {})])
def test_p3eft_and_split_lora_train_the_whole_t5_over_the_nodes(t5, strategy, params):
    """Real nodes, in-process: the loss is finite, every adapter's B (zero at init) moved, decoder
    ones included, and the θ-difference attack and leak report still run on what the servers kept."""
    transport = InProcessTransport()
    result = Engine(_config(strategy, t5, **params), transport, ToySentiment(num_train=32, num_test=16),
                    progress=False).run()
    found = [n for h in transport.hosts.values() for n in h.nodes.values()]
    server = next(n for n in found if isinstance(n, ModelServer))
    client = next(n for n in found if not isinstance(n, ModelServer))
    assert isinstance(server.model.encoder, type(load_encoder(t5, stack=ED)))
    final = result.history[-1]
    assert math.isfinite(final["train_loss"]) and math.isfinite(final["test_loss"])
    for adapter in client.adapters:
        moved = {k for k, v in adapter.items() if ".lora_B." in k and float(v.detach().abs().sum()) > 0}
        assert moved == {k for k in adapter if ".lora_B." in k} and any("EncDecAttention" in k for k in moved)
    if strategy == "p3eft":
        assert all(0.0 <= final[k] <= 1.0 for k in ("leak_act", "leak_grad", "leak_theta", "leak_cat", "leak_probe"))


def test_t5_stack_is_validated(t5, tmp_path):
    with pytest.raises(ConfigError, match=r"params\.t5_stack.*allowed: one of 'encoder', 'encoder-decoder'"):
        load_run_config({"strategy": "p3eft", "num_parties": 1, "params": {"t5_stack": "decoder"}})
    with pytest.raises(ConfigError, match=r"params\.t5_stack: unknown key"):  # SAP splits T5's encoder alone
        load_run_config({"strategy": "sap", "num_parties": 1, "params": {"t5_stack": ED}})
    gpt2 = tiny_gpt2_dir(tmp_path / "gpt2")
    cfg = _config("p3eft", gpt2)
    with pytest.raises(ConfigError, match=r"params\.t5_stack.*'encoder-decoder' for a gpt2 model; allowed: 'encoder'") as e:
        Engine(cfg, InProcessTransport(), ToySentiment(), progress=False).strategy.prepare(ToySentiment())
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"params\.t5_stack"):
        load_encoder(gpt2, stack=ED)
