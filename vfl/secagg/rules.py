"""The honest client's rules on an unmask request, as pure checks (what Bonawitz et al. refuse).

``check_view`` decides whether a survivor may answer the server's view (survivors S, dropped D)
of the round it masked last. Besides well-formedness (S and D disjoint, S + D = the parties it
masked with, itself in S) it refuses:

- a survivor set smaller than ``quorum(t, c)`` = max(t, 2, c + 2), c the colluders it guards against
  (``privacy.colluders``, else t - 1): "you alone survived", told to every party, would make each
  reveal its self stream and every pair key (every input opens), and "you and the c colluders
  survived" would open the victim's input once the colluders hand over their keys with it;
- pair keys for a peer listed as a survivor earlier in the same round: a survivor moved to
  "dropped" after its vector (and self key) arrived would open exactly. A survivor that vanishes
  keeps its place in S; its self mask is rebuilt from seed shares instead (or the round aborts).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from vfl.core.errors import ConfigError, ProtocolError, RevealRefused
from vfl.secagg.consistency import quorum


def check_parties(parties: Iterable[int], threshold: int) -> tuple[int, ...]:
    """Sorted distinct party ids (at least 2) with 1 <= threshold <= M-1; ConfigError otherwise."""
    ids = tuple(sorted({int(p) for p in parties}))
    if len(ids) < 2:
        raise ConfigError("parties", f"secure aggregation needs at least 2 parties, got {ids}")
    if isinstance(threshold, bool) or not isinstance(threshold, int):
        raise ConfigError("threshold", f"must be an integer, got {threshold!r}")
    if not 1 <= threshold <= len(ids) - 1:
        raise ConfigError(
            "threshold", f"must be in [1, {len(ids) - 1}] for {len(ids)} parties, got {threshold}"
        )
    return ids


def check_session_parties(parties: Iterable[int], threshold: int, *, roster: int = 0) -> tuple[int, ...]:
    """A session's parties: as ``check_parties``; a session over part of a run's roster of ``roster`` parties (a
    restart after skip-party dropouts: the survivors) keeps the run's t (at most roster - 1) and may hold as few
    as t parties; its seed shares then need every peer (``share_threshold``)."""
    ids = tuple(sorted({int(p) for p in parties}))
    if len(ids) < int(roster) and len(ids) >= 2 and threshold == len(ids) and threshold <= int(roster) - 1:
        return ids
    return check_parties(ids, threshold)


def share_threshold(threshold: int, peers: int) -> int:
    """How many of a party's ``peers`` rebuild its seed: t, or all of them where the session has only t parties."""
    return min(threshold, peers)


@dataclass(frozen=True)
class Reveal:
    """A survivor's answer to an unmask request: round-bound values only, never a long-lived secret."""

    round_id: str
    # tensor name -> my self-mask release of (round, name): the packed self stream masked with view
    # streams over the survivors I was told (vfl.secagg.release); never the self key itself
    self_keys: dict[str, bytes]
    pair_keys: dict[int, dict[str, bytes]]  # dropped party -> tensor name -> our pair key of (round, name)


View = tuple[frozenset[int], frozenset[int]]  # (survivors, dropped)


def check_view(*, me: int, rnd: str, live: frozenset[int], gone: frozenset[int], active: frozenset[int],
               threshold: int, colluders: int, previous: View | None) -> None:
    """Raise unless survivor ``me`` may reveal for the view (live, gone); ``previous`` = the view of
    an earlier request of this round (None on the first): a repeat must repeat it."""
    listed = previous[0] if previous is not None else frozenset()
    if live & gone:
        raise ProtocolError(f"round {rnd}: parties {sorted(live & gone)} both survived and dropped")
    if live | gone != active:
        raise ProtocolError(
            f"round {rnd}: survivors + dropped {sorted(live | gone)} != the parties I masked "
            f"with {sorted(active)}"
        )
    if len(live) < quorum(threshold, colluders):
        raise RevealRefused(
            f"round {rnd}: party {me} refuses survivor set {sorted(live)}: fewer than max(t, 2, colluders + 2) = "
            f"{quorum(threshold, colluders)} survivors (t = {threshold}, colluders = {colluders}) would expose its input"
        )
    redeclared = sorted(gone & listed)
    if redeclared:
        raise RevealRefused(
            f"round {rnd}: parties {redeclared} were listed as survivors earlier in this round; "
            f"party {me} never reveals their pair keys (their self masks come from seed shares)"
        )
    if previous is not None and previous != (live, gone):
        raise RevealRefused(f"round {rnd}: the server changed its view from survivors {sorted(listed)} "
                            f"to {sorted(live)}; a repeat request must repeat it")
