"""A set-up over fewer parties than the roster, through in-process engine runs (mode announced)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.secagg.test_secagg_announced_resetup import (  # noqa: F401 - the fixture `run`
    C,
    T,
    _eval,
    _input,
    _setup,
    run,
)
from vfl.secagg.consistency import MaliciousServer


def test_announced_a_set_up_shrunk_to_the_victim_and_a_colluder_is_refused(run):  # noqa: F811
    """The run's own t and colluders, honest parties 'dropped': below max(t, 2, colluders + 2) = 3."""
    parties, _, _ = run
    v, ally = sorted(parties)[:2]
    with pytest.raises(MaliciousServer, match=rf"round setup: party {v} .*at least 3 of them after dropouts"):
        _setup(parties, ids=[v, ally], threshold=T, colluders=C)


def test_announced_a_set_up_over_the_smallest_set_is_accepted_and_sums_three_inputs(run):  # noqa: F811
    parties, k, _ = run
    v, ally, b, _gone = sorted(parties)
    for n in parties.values():
        n.masked_before = None  # the run masked this batch over every party (the memory rule is tested elsewhere)
    ids = [v, ally, b]  # 3 = max(t, 2, colluders + 2)
    _setup(parties, ids=ids, threshold=T, colluders=C)
    assert parties[v].client.parties == tuple(ids)
    total = sum(_eval(parties[p], ids, ids) for p in ids) & (1 << k) - 1
    assert np.array_equal(total, sum(_input(parties[p]) for p in ids) & (1 << k) - 1)  # one sum of three inputs
