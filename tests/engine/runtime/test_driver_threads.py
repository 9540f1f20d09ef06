"""In-process runs compute in the driver with ``train.driver_threads``: the runs that check the threads are given back."""

from __future__ import annotations

import os

import pytest
import torch

import strategies  # noqa: F401  (registers the strategies)
from tests.support.helpers import BlobSource
from tests.unit.runtime.test_driver_threads import TINY
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport


def _seen(train: dict) -> tuple[int, int]:
    cfg = load_run_config({**TINY, "train": {**TINY["train"], **train}})
    seen: list[int] = []
    transport = InProcessTransport()
    engine = Engine(cfg, transport, BlobSource(num_parties=2), progress=False,
                    on_epoch_end=lambda *_: seen.append(torch.get_num_threads()))
    try:
        engine.run()
    finally:
        transport.shutdown()
    return seen[0], transport.threads


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores to tell 1 thread from the default")
@pytest.mark.parametrize("train,want", [({}, 1), ({"threads_per_actor": 2}, 2), ({"driver_threads": 2}, 2),
                                        ({"threads_per_actor": 2, "driver_threads": 1}, 1)])
def test_in_process_runs_use_the_configured_threads_and_give_them_back(train, want):
    before = torch.get_num_threads()
    torch.set_num_threads(2 if want == 1 else 1)  # control: a different setting that would stay otherwise
    try:
        outside = torch.get_num_threads()
        assert _seen(train) == (want, want)
        assert torch.get_num_threads() == outside  # restored at shutdown
    finally:
        torch.set_num_threads(before)
