"""The wire vocabulary modules name every message kind a run puts on the wire, and no kind is a
string literal outside them (issue #16 §2)."""

from __future__ import annotations

import ast
from pathlib import Path

import strategies  # noqa: F401
from parties.secagg import wire as secagg_wire
from parties.vertical import wire as vertical_wire
from tests.party_data import write_blob_parties
from vfl.data import psi_wire
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime import message
from vfl.runtime.transport.inprocess import InProcessTransport

ROOT = Path(__file__).resolve().parents[2]
VOCABULARY = {*vertical_wire.KINDS, *secagg_wire.SETUP_KINDS, *secagg_wire.ROUND_KINDS, *psi_wire.KINDS,
              message.METRICS}
VOCABULARY_FILES = {"parties/vertical/wire.py", "parties/secagg/wire.py", "vfl/data/psi_wire.py", "vfl/runtime/message.py"}
# the split-LLM half keeps its own protocol modules (being reorganized separately)
LLM = ("parties/llm/", "strategies/sap.py", "strategies/base/split_llm.py", "strategies/p3eft.py",
       "strategies/base/llm_leak.py")


def test_every_kind_of_a_pbm_run_with_psi_and_auth_is_in_the_vocabulary(tmp_path):
    data, _ = write_blob_parties(tmp_path, num_parties=3, overlap=0.8, num_train=120, num_test=40)
    cfg = load_run_config({"strategy": "pbm", "num_parties": 3, "seed": 1, "auth": True,
                           "params": {"b": 8}, "privacy": {"noise_rng": "seeded"},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 1, "batch_size": 40, "lr": 0.05}})
    engine = Engine(cfg, InProcessTransport(), data, progress=False)
    summary = engine.run().summary
    seen = set(engine.ledger.by_kind)
    assert seen - VOCABULARY == set()
    # the run exercised the vertical step, the SecAgg set-up and rounds, PSI and the metrics read
    assert {vertical_wire.Kind.TRAIN_FORWARD, vertical_wire.Kind.EVAL_FORWARD, secagg_wire.Kind.SETUP, secagg_wire.Kind.UNMASK,
            psi_wire.Kind.REQUEST, psi_wire.Kind.ALIGN, message.METRICS} <= seen
    assert summary["psi_bytes"] > 0 and set(summary["bytes_by_kind"]) == seen


def test_the_metrics_reply_has_the_one_record_name():
    q = message.make(message.METRICS, src=0, dst=0, round=message.round_tag(0, 0, "control"))
    rep = message.decode(message.encode(message.metrics_reply(q, train_loss=0.5)))
    assert set(rep.content.metric_records) == {message.METRICS_RECORD}
    assert message.read_metrics(rep) == {"train_loss": 0.5}


def _literal_kinds(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in VOCABULARY:
            out.append((node.lineno, node.value))
    return out


def test_no_message_kind_is_spelled_as_a_string_outside_its_vocabulary_module():
    found = []
    for top in ("vfl", "parties", "strategies", "simulations"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in VOCABULARY_FILES or rel.startswith(LLM):
                continue
            found += [f"{rel}:{line}: {kind!r}" for line, kind in _literal_kinds(path)]
    assert found == []
