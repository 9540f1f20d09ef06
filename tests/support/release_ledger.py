"""Shared pieces of the write-ahead privacy ledger tests: counting the sums the server decoded
from the wires, and the ε of that many releases."""

from __future__ import annotations

from collections import Counter
from typing import Any

from parties.vertical import wire as vw
from tests.support.wire_tap import WireTap
from vfl.engine.schema import RunConfig
from vfl.privacy import Accountant, PBMEvent
from vfl.runtime.message import parse_round


def decoded_rounds(taps: list[WireTap], *, use_rows: bool) -> Counter[tuple[int, int]]:
    """(epoch, step) -> how many times the server decoded that batch's sum, over every process.

    The evidence is on the wire: the server answers a training round with its gradient (a
    ``train.forward`` from the server carrying arrays) only after it opened the round's sum. The
    driver's epoch-start ``train.forward`` carries no arrays and is not counted. ``use_rows``:
    read the hosts' own logs (Ray: the server's gradients travel actor to actor)."""
    count: Counter[tuple[int, int]] = Counter()
    for tap in taps:
        if use_rows:
            items: list[tuple[Any, ...]] = [(r[0], r[2], r[3], r[5]) for r in tap.rows]
        else:
            items = [(w.src, w.kind, w.round, w.payload) for w in tap.wires.values()]
        for src, kind, rnd, payload in items:
            if src == vw.SERVER_ID and kind == vw.Kind.TRAIN_FORWARD and payload > 0:
                phase, epoch, step = parse_round(rnd)
                if phase == "train":
                    count[(epoch, step)] += 1
    return count


def worst_sample_releases(count: Counter[tuple[int, int]]) -> int:
    """Releases of the most-released sample: per epoch, the most-repeated batch (every sample is
    in one batch of each epoch, so a sample of that batch has the maximum in every epoch)."""
    per_epoch: dict[int, int] = {}
    for (epoch, _), n in count.items():
        per_epoch[epoch] = max(per_epoch.get(epoch, 0), n)
    return sum(per_epoch.values())


def pbm_epsilon(cfg: RunConfig, releases: int, *, num_parties: int | None = None) -> float:
    """ε of ``releases`` PBM releases of one sample's embedding at the run's settings."""
    acc = Accountant()
    acc.record(PBMEvent(b=cfg.params.b, beta=cfg.params.beta, num_parties=num_parties or cfg.num_parties,
                        dim=cfg.model.embed_dim, count=releases))
    return acc.epsilon(cfg.privacy.delta)[0]
