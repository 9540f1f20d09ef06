"""CONTRIBUTING.md's glossary and docs/glossary.md say the same words: every term of the short table
is in the full one, and the words they define exist in the code as named."""

from __future__ import annotations

import re
from pathlib import Path

from parties.secagg import wire as secagg_wire
from parties.vertical import wire as vertical_wire
from vfl.data import psi_wire
from vfl.engine.strategy import Strategy
from vfl.runtime.node import NodeSpec

ROOT = Path(__file__).resolve().parents[3]


def _terms(text: str) -> set[str]:
    return set(re.findall(r"^\| \*\*([a-z ]+)\*\*", text, flags=re.MULTILINE))


def test_every_word_of_the_contributing_glossary_is_in_the_full_glossary():
    short = _terms((ROOT / "CONTRIBUTING.md").read_text())
    full = _terms((ROOT / "docs" / "glossary.md").read_text())
    assert len(short) >= 8 and short <= full, short - full


def test_the_vocabulary_shape_the_glossary_promises():
    for module, classes in ((vertical_wire, ("Kind", "Record", "Array", "Key")),
                            (secagg_wire, ("Kind", "Record", "Key", "Phase")),
                            (psi_wire, ("Kind", "Record", "Array", "Key"))):
        for name in classes:
            values = [v for k, v in vars(getattr(module, name)).items() if k.isupper()]
            assert values and all(isinstance(v, str) for v in values), (module.__name__, name)
    assert vertical_wire.SERVER_ID == 0 and "server_profile" in vars(Strategy)
    assert set(NodeSpec.__annotations__) == {"node_id", "role", "name", "group"}
