"""The server reads an embedding's step from its round tag (#29.2: parties no longer echo the STEP record).

The round tag is metadata, covered by the authenticator (``tests/unit/runtime/test_auth.py``
``test_rewritten_metadata_is_rejected``: a tag rewritten in transit is refused); replays and
reorderings are refused by the sequence number. What the server itself checks is played here: a
round's embeddings must all carry one round tag, of the phase it is handling."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from parties.vertical import wire as vw
from parties.vertical.party import ActiveServer
from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire

PARTIES = [vw.party_node_id(0), vw.party_node_id(1)]


def _emb(src: int, tag: str):
    return wire.make(vw.Kind.TRAIN_FORWARD, src=src, dst=vw.SERVER_ID, round=tag,
                     content=wire.records(**{vw.Record.EMB: wire.arrays(**{vw.Array.FLOAT: np.ones((2, 3), np.float32)})}))


def _check(messages, phase="train"):
    return ActiveServer._check_round(SimpleNamespace(party_ids=PARTIES), messages, phase)


def test_the_step_comes_from_the_round_tag_and_no_step_record_is_needed():
    msgs = [_emb(p, wire.round_tag(2, 7)) for p in PARTIES]
    assert all(vw.Record.STEP not in m.content for m in msgs)
    assert _check(msgs) == (2, 7)
    assert _check([_emb(p, wire.round_tag(1, 4, "eval")) for p in PARTIES], "eval") == (1, 4)


def test_embeddings_of_another_step_or_phase_are_refused():
    stale = [_emb(PARTIES[0], wire.round_tag(2, 7)), _emb(PARTIES[1], wire.round_tag(2, 6))]  # one from step 6
    with pytest.raises(ProtocolError, match="train embeddings from different rounds"):
        _check(stale)
    with pytest.raises(ProtocolError, match="train embeddings tagged with round phase 'eval'"):
        _check([_emb(p, wire.round_tag(2, 7, "eval")) for p in PARTIES])
    with pytest.raises(ProtocolError, match="missing nodes"):
        _check([_emb(PARTIES[0], wire.round_tag(2, 7))])
