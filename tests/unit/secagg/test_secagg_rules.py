"""The honest-client rules: each request that would expose a protected input raises RevealRefused."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.secagg_helpers import inputs, make_session, run_round
from vfl.core.errors import ProtocolError, RevealRefused


def _masked_round(num: int = 5, threshold: int = 2, rnd: str = "r1", colluders: int | None = None):
    clients, server = make_session(num, threshold, 10, colluders=colluders)
    xs = inputs(range(num), 4, 8, 0)
    run_round(clients, server, xs, rnd="r0", k=10)
    for p, c in clients.items():
        c.mask(xs[p], round_id=rnd, name="emb", k=10)
    return clients, server, xs


def test_keys_only_for_the_round_masked_last_never_a_past_round() -> None:
    clients, _, _ = _masked_round()
    with pytest.raises(RevealRefused, match="masked last"):
        clients[0].unmask(round_id="r0", survivors=range(4), dropped=[4])  # past round: stays protected
    with pytest.raises(RevealRefused, match="masked last"):
        clients[0].unmask(round_id="r9", survivors=range(4), dropped=[4])  # a round never masked
    with pytest.raises(RevealRefused, match="masked last"):
        clients[0].reveal_shares(round_id="r0", owners=[1])


def test_never_pair_keys_and_seed_shares_of_the_same_peer() -> None:
    clients, _, _ = _masked_round(threshold=3, colluders=0)  # t + max(t, 2, c + 2) > M + c: seed shares allowed
    clients[0].unmask(round_id="r1", survivors=range(5), dropped=[])
    clients[0].reveal_shares(round_id="r1", owners=[3])  # 3 vanished: its seed shares
    with pytest.raises(RevealRefused, match="seed shares of parties \\[3\\]"):
        clients[0].unmask(round_id="r1", survivors=[0, 1, 2, 4], dropped=[3])  # ... and now its pair keys?
    clients2, _, _ = _masked_round()
    clients2[1].unmask(round_id="r1", survivors=[0, 1, 2, 3], dropped=[4])  # pair keys of 4
    with pytest.raises(RevealRefused, match="not survivors"):
        clients2[1].reveal_shares(round_id="r1", owners=[4])
    # even a server that later claims 4 survived in the same round gets nothing
    with pytest.raises(RevealRefused, match="changed its view"):
        clients2[1].unmask(round_id="r1", survivors=range(5), dropped=[])


def test_pair_keys_revealed_in_one_round_block_seed_shares_in_any_later_round() -> None:
    clients, server, xs = _masked_round(num=6, threshold=2)
    clients[0].unmask(round_id="r1", survivors=[0, 1, 2, 3, 5], dropped=[4])
    clients[0].mask(xs[0], round_id="r2", name="emb", k=10)
    clients[0].unmask(round_id="r2", survivors=[0, 1, 2, 3, 5], dropped=[])
    with pytest.raises(RevealRefused, match="not survivors|pair keys of parties"):
        clients[0].reveal_shares(round_id="r2", owners=[4])


def test_nothing_about_its_own_seed() -> None:
    clients, _, _ = _masked_round()
    clients[2].unmask(round_id="r1", survivors=range(5), dropped=[])
    with pytest.raises(RevealRefused, match="own seed"):
        clients[2].reveal_shares(round_id="r1", owners=[2])
    # and having been asked, it considers its seed exposed: it refuses to mask again
    with pytest.raises(RevealRefused, match="new session"):
        clients[2].mask(np.zeros(4, dtype=int), round_id="r2", name="emb", k=10)


def test_no_masking_after_being_declared_dropped() -> None:
    clients, _, _ = _masked_round()
    with pytest.raises(RevealRefused, match="not a survivor"):
        clients[4].unmask(round_id="r1", survivors=range(4), dropped=[4])
    with pytest.raises(RevealRefused, match="new session"):
        clients[4].mask(np.zeros(4, dtype=int), round_id="r2", name="emb", k=10)


def test_shares_only_after_the_unmask_request_and_only_of_survivors() -> None:
    clients, _, _ = _masked_round()
    with pytest.raises(RevealRefused, match="after the unmask request"):
        clients[0].reveal_shares(round_id="r1", owners=[1])
    clients[0].unmask(round_id="r1", survivors=[0, 1, 2, 3], dropped=[4])
    with pytest.raises(RevealRefused, match="not survivors"):
        clients[0].reveal_shares(round_id="r1", owners=[4])


def test_inconsistent_views_are_protocol_errors() -> None:
    clients, _, _ = _masked_round()
    with pytest.raises(ProtocolError, match="both survived and dropped"):
        clients[0].unmask(round_id="r1", survivors=[0, 1, 2, 3, 4], dropped=[4])
    with pytest.raises(ProtocolError, match="parties I masked with"):
        clients[0].unmask(round_id="r1", survivors=[0, 1, 2], dropped=[])
    assert issubclass(RevealRefused, ProtocolError)


def test_dropped_parties_leave_the_active_set_for_the_next_round() -> None:
    clients, _, xs = _masked_round()
    clients[0].unmask(round_id="r1", survivors=[0, 1, 2, 3], dropped=[4])
    assert clients[0].active == {0, 1, 2, 3}
    clients[0].mask(xs[0], round_id="r2", name="emb", k=10)  # masks with 1, 2, 3 only
    with pytest.raises(ProtocolError, match="parties I masked with"):
        clients[0].unmask(round_id="r2", survivors=range(5), dropped=[])
    clients[0].unmask(round_id="r2", survivors=range(4), dropped=[])
