"""The wire vocabulary modules name every message kind a run puts on the wire, and no kind is a
string literal outside them (issue #16 §2)."""

from __future__ import annotations

import ast
from pathlib import Path

import strategies  # noqa: F401
from parties.secagg import wire as secagg_wire
from parties.trees import wire as trees_wire
from parties.vertical import wire as vertical_wire
from vfl.data import psi_wire
from vfl.runtime import message

ROOT = Path(__file__).resolve().parents[3]
VOCABULARY = {*vertical_wire.KINDS, *secagg_wire.SETUP_KINDS, *secagg_wire.ROUND_KINDS, *psi_wire.KINDS,
              *trees_wire.KINDS, message.METRICS}
VOCABULARY_FILES = {"parties/vertical/wire.py", "parties/secagg/wire.py", "vfl/data/psi_wire.py", "vfl/runtime/message.py",
                    "parties/trees/wire.py"}
# the split-LLM half keeps its own protocol modules (being reorganized separately)
LLM = ("parties/llm/", "strategies/sap.py", "strategies/base/split_llm.py", "strategies/p3eft.py",
       "strategies/base/llm_leak.py")


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
