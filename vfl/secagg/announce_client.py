"""The party's side of mode ``announced`` (``vfl.secagg.announce``): accept the server's set S for a round, then
mask over S with pair streams only; one round, one input and one sample's row never go out over two sets.

A base of ``SecAggClient`` kept apart from the unmask/reveal path of the other modes; the round state it reads
and writes (``_used``, ``_rounds``, ``_round``, ``_announced``, ``_accepted``, ``_inputs``) is set up there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from vfl.core.errors import ProtocolError
from vfl.secagg.announce import check_announcement
from vfl.secagg.consistency import AnnouncementRefused
from vfl.secagg.masking import apply_pairwise_masks
from vfl.secagg.memory import Memory, first_conflict, input_digest, row_digests
from vfl.secagg.modular import to_residues
from vfl.secagg.party_keys import PartyKeys

__all__ = ["AnnouncedMasking"]


class AnnouncedMasking(PartyKeys):
    """Mode announced: ``announce`` -> ``mask`` over the announced set (``_mask_announced``), each round at most
    once; ``_check_rows`` is the per-row rule (a patch point: tests play the party without it)."""

    mode: str
    colluders: int
    _used: set[tuple[str, str]]
    _rounds: set[str]
    _round: str | None
    _announced: dict[str, frozenset[int]]  # round -> the set it accepted
    _accepted: frozenset[int]  # the set accepted last (a request naming none repeats it)
    _inputs: Memory  # digest of each input (and row) masked -> its set, over every session of the party

    def announce(self, *, round_id: int | str, members: Iterable[int] | None = None) -> frozenset[int]:
        """Mode announced: accept the server's set S for ``round_id`` (None: the set accepted last, at first the
        roster) before masking it; AnnouncementRefused for a set too small, without me, naming strangers, or a
        round announced before (each round is masked at most once)."""
        if self.mode != "announced":
            raise ProtocolError(f"party {self.party_id}: announced sets belong to secagg mode announced")
        rnd = str(round_id)
        live = check_announcement(me=self.party_id, rnd=rnd, members=self._accepted if members is None else members,
                                  parties=self.parties, threshold=self.threshold, colluders=self.colluders,
                                  announced=self._announced.keys() | self._rounds)
        self._announced = {rnd: live}  # only the latest round can be masked; older ones stay refused by _rounds
        self._rounds.add(rnd)
        self._accepted = live
        return live

    def _mask_announced(self, values: npt.ArrayLike, *, rnd: str, name: str, k: int,
                        rows: Sequence[str] | None = None) -> npt.NDArray[np.uint32]:
        """Mode announced: pair streams over the round's announced set, no self mask; once per (round, name)."""
        live = self._announced.get(rnd)
        if live is None:
            raise ProtocolError(f"party {self.party_id}: round {rnd} was not announced (or is not the latest); "
                                "mode announced masks only over a set the server named before")
        if (rnd, name) in self._used:
            raise ProtocolError(f"party {self.party_id} already masked {name!r} in round {rnd}")
        x = to_residues(values, k=k)
        digest = input_digest(x, name=name, k=k)
        if (hit := first_conflict(self._inputs, [("", digest)], live)) is not None:  # e.g. an eval batch asked again
            raise AnnouncementRefused(rnd, self.party_id, f"this input was masked before over the set "
                                      f"{sorted(hit[1])}; masking it again over {sorted(live)} would "
                                      "open differences of sums")
        seen = self._check_rows(x, rows, rnd=rnd, name=name, k=k, live=live)
        self._inputs[digest] = live
        self._inputs.update(dict.fromkeys(seen, live))
        self._used.add((rnd, name))
        self._round = rnd
        return apply_pairwise_masks(x, own_id=self.party_id, round_id=rnd, name=name, k=k,
                                    seeds={p: self._pair_key(p, rnd, name) for p in sorted(live) if p != self.party_id})

    def _check_rows(self, x: npt.NDArray[np.uint32], rows: Sequence[str] | None, *, rnd: str, name: str, k: int,
                    live: frozenset[int]) -> list[bytes]:
        """Mode announced: one sample's row of codes is never masked over two different sets either (a server
        that freezes the bottom model, e.g. with zero gradients, sees each training sample again in another
        batch of a later epoch: per-row sums over {v, a}, {v, b}, {a, b} solve v's row). The row digests."""
        if not rows:
            return []
        seen = row_digests(x, rows, name=name, k=k, party=self.party_id)
        if (hit := first_conflict(self._inputs, zip(map(str, rows), seen, strict=True), live)) is not None:
            raise AnnouncementRefused(rnd, self.party_id, f"sample {hit[0]}'s row was masked before with these "
                                      f"codes over the set {sorted(hit[1])}; masking it again over "
                                      f"{sorted(live)} would open differences of sums")
        return seen
