"""``transport.max_actors: 0`` (the default): two party actors per core, at most 8."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from vfl.runtime.node import NodeSpec
from vfl.runtime.transport.placement import auto_max_actors, place


@pytest.mark.parametrize(("cpus", "expected"), [(None, 2), (1, 2), (2, 4), (3, 6), (4, 8), (64, 8)])
def test_auto_max_actors(cpus, expected):
    assert auto_max_actors(cpus) == expected


def _specs(m: int) -> list[NodeSpec]:
    return [NodeSpec(0, "server", "server", "server")] + [NodeSpec(i, "party", f"p{i}", "") for i in range(1, m + 1)]


def _transport(max_actors: int) -> SimpleNamespace:
    return SimpleNamespace(max_actors=max_actors, parties_per_actor=0, cpus_per_actor=0.1, gpus_per_actor=0.0)


def test_default_packs_m100_into_auto_actors_plus_server():
    groups = place(_specs(100), _transport(0))
    parties = [g for g in groups if g.name.startswith("parties-")]
    assert len(parties) == auto_max_actors(os.cpu_count())
    assert sorted(s.node_id for g in parties for s in g.specs) == list(range(1, 101))  # each party once
    assert [g.name for g in groups if not g.name.startswith("parties-")] == ["server"]


def test_explicit_max_actors_wins():
    assert len(place(_specs(100), _transport(8))) == 9
    assert len(place(_specs(3), _transport(8))) == 4  # never more actors than parties
