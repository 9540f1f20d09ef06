"""``colluder_split`` in every SecAgg mode: the server with ``colluders`` parties that hand it everything
they hold. With an unmask exchange it lies about the survivors (``lying.colluder_split_exchange``); in mode
``announced`` it announces the set {v} + colluders (``announced.small_set``). ``declared``: the clients'
``privacy.colluders`` (None: undeclared, t - 1); ``weak=True`` plays clients whose quorum ignores the
colluders (the control)."""

from __future__ import annotations

from typing import Any

from vfl.attacks.secagg.announced import small_set
from vfl.attacks.secagg.lying import Outcome, colluder_split_exchange


def colluder_split(*, num: int, threshold: int, mode: str, colluders: int = 1, declared: int | None = None,
                   k: int = 16, seed: int = 0, victim: int = 0, weak: bool = False, **exchange: Any) -> Outcome:
    """(inputs opened, a party refused) of the colluders' attack in ``mode``."""
    if mode == "announced":
        return small_set(num=num, threshold=threshold, colluders=colluders, declared=declared, k=k, seed=seed,
                         victim=victim, weak=weak)
    return colluder_split_exchange(num=num, threshold=threshold, mode=mode, colluders=colluders, declared=declared,
                                   k=k, seed=seed, victim=victim, weak=weak, **exchange)
