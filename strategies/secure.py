"""Shared driver-side secure-aggregation set-up and the checks every SecAgg strategy needs."""

from __future__ import annotations

import math

from strategies.vertical import SERVER_ID, party_node_id
from vfl import message as wire
from vfl.errors import ConfigError
from vfl.grid import Grid
from vfl.message import BROADCAST
from vfl.schema import RunConfig
from vfl.secagg import new_session_id

SETUP_ROUND = wire.round_tag(0, 0, "setup")


def check_secagg_config(cfg: RunConfig, *, threshold: int) -> None:
    """SecAgg needs additive fusion, at least two parties and a threshold in [0, M-1]."""
    if cfg.model.fusion != "sum":
        raise ConfigError("model.fusion", f"secure aggregation reveals only the SUM of the embeddings; "
                          f"fusion must be 'sum', got {cfg.model.fusion!r}")
    if cfg.num_parties < 2:
        raise ConfigError("num_parties", "secure aggregation needs at least 2 parties")
    if threshold > cfg.num_parties - 1:
        raise ConfigError("params.threshold", f"got {threshold}; allowed: 0 (auto) or [1, {cfg.num_parties - 1}]")


def shamir_threshold(num_parties: int, threshold: int) -> int:
    """The configured threshold, or ceil(2(M-1)/3) when 0 (survives a third of the peers dropping)."""
    return threshold or max(1, math.ceil(2 * (num_parties - 1) / 3))


def run_key_setup(grid: Grid, *, num_parties: int, threshold: int) -> None:
    """Keys -> roster -> sealed shares -> delivery, all as counted messages in the 'setup' phase."""
    ids = [party_node_id(i) for i in range(num_parties)]
    start = wire.make("query.secagg_keys", src=SERVER_ID, dst=BROADCAST, round=SETUP_ROUND,
                      content=wire.records(sa=wire.config(session=new_session_id(), parties=ids,
                                                          threshold=shamir_threshold(num_parties, threshold))))
    grid.run_until_quiet([start])
