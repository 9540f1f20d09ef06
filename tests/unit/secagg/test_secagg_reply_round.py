"""An UNMASK reply names its round by its round tag only (#29.2: the SecAgg record no longer repeats it).

The real party handler (``SecAggParty.on_unmask``) answers a real request; the server side parses the
replies as ``SecAggActiveServer.on_unmask`` does (``answered_round`` + ``reveal_of``) and hands them to
the real ``SecAggServer``: the replies of the open round unmask the sum (control), a reply whose tag
names another round — a stale or replayed release — is refused, and a recovery-tagged reply answers
the round of its epoch and step in the open round's phase. The tag itself is authenticated metadata
(``tests/unit/runtime/test_auth.py`` ``test_rewritten_metadata_is_rejected``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from parties.secagg import wire as sw
from parties.secagg.party import SecAggParty, answered_round, cfg_of, reveal_of
from parties.vertical import wire as vw
from tests.support.secagg_helpers import inputs, make_session, mod_sum
from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire

M, T, K, N = 4, 3, 12, 10
ROUND = wire.round_tag(0, 5)


def _replies(tag: str = ROUND):
    """The parties' real UNMASK replies to the server's request of ROUND (sent with round tag ``tag``)."""
    clients, server = make_session(M, T, K)
    xs = inputs(range(M), N, K, 3)
    masked = {p: c.mask(xs[p], round_id=ROUND, name=vw.Record.EMB, k=K) for p, c in clients.items()}
    server.open_round(masked, round_id=ROUND, name=vw.Record.EMB)
    req = wire.make(sw.Kind.UNMASK, src=vw.SERVER_ID, dst=wire.BROADCAST, round=tag,
                    content=wire.records(**{sw.Record.SECAGG: wire.config(**{sw.Key.ROUND: ROUND})}))
    replies = [SecAggParty.on_unmask(SimpleNamespace(client=c, node_id=p), [req])[0] for p, c in clients.items()]
    return replies, server, xs


def _reveals(replies, phase: str = "train"):
    return {p: reveal_of(m, round_id=answered_round(m, recovery_phase=phase)) for p, m in enumerate(replies)}


def test_replies_of_the_open_round_unmask_the_sum_without_a_round_key():
    replies, server, xs = _replies()
    assert all(sw.Key.ROUND not in cfg_of(m) for m in replies)  # 16 bytes fewer per release
    assert server.add_unmask(ROUND, _reveals(replies)) is None
    total, summed = server.result(ROUND)
    np.testing.assert_array_equal(total, mod_sum(xs.values(), K, N))


def test_a_reply_tagged_with_another_round_is_refused():
    replies, server, _ = _replies()
    replies[1] = wire.make(replies[1].metadata.message_type, src=1, dst=vw.SERVER_ID,
                           round=wire.round_tag(0, 4), content=replies[1].content)  # a release tagged step 4
    with pytest.raises(ProtocolError, match="revealed keys of another round"):
        server.add_unmask(ROUND, _reveals(replies))


def test_a_recovery_tagged_reply_answers_the_open_rounds_phase():
    replies, server, xs = _replies(tag=wire.round_tag(0, 5, sw.Phase.RECOVERY))
    assert {answered_round(m, recovery_phase="eval") for m in replies} == {wire.round_tag(0, 5, "eval")}
    server.add_unmask(ROUND, _reveals(replies, phase="train"))
    np.testing.assert_array_equal(server.result(ROUND)[0], mod_sum(xs.values(), K, N))


def test_a_reply_with_no_round_at_all_is_a_protocol_error():
    replies, _, _ = _replies()
    with pytest.raises(ProtocolError, match="names no round"):
        reveal_of(replies[0])
