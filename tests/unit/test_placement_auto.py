"""``transport.max_actors: 0`` (the default): two party actors per core, at most 8, and no single-party actors
beyond one per core."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from vfl.node import NodeSpec
from vfl.transport.placement import auto_max_actors, place


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


@pytest.mark.parametrize(("cpus", "parties", "expected"),
                         [(2, 4, 2), (2, 3, 2), (2, 2, 2), (2, 5, 3), (2, 100, 4), (1, 2, 1), (8, 4, 8), (64, 100, 8)])
def test_auto_max_actors_gives_no_single_party_actor_beyond_one_per_core(cpus, parties, expected):
    assert auto_max_actors(cpus, parties) == expected


def test_the_demo_on_two_cores_packs_two_parties_per_actor(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    groups = place(_specs(4), _transport(0))
    assert [(g.name, [s.node_id for s in g.specs]) for g in groups] == [
        ("server", [0]), ("parties-0", [1, 2]), ("parties-1", [3, 4])]
    assert len(place(_specs(4), _transport(4))) == 5  # an explicit max_actors still wins
