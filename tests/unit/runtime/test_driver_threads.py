"""In-process runs compute in the driver with ``train.driver_threads`` (else ``train.threads_per_actor``)
torch threads, not torch's default of one per core; the caller's setting comes back at shutdown."""

from __future__ import annotations

import strategies  # noqa: F401  (registers the strategies)
from vfl.engine.engine import torch_threads
from vfl.engine.schema import load_run_config

TINY = {"strategy": "npq", "num_parties": 2, "auth": False, "train": {"epochs": 1, "batch_size": 48}}


def test_actors_keep_threads_per_actor():
    cfg = load_run_config({**TINY, "train": {"threads_per_actor": 1, "driver_threads": 2}})
    assert torch_threads(cfg.train, "ray") == 1 and torch_threads(cfg.train, "inprocess") == 2
