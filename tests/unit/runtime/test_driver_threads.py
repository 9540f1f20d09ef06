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


def test_compute_threads_cover_the_blas_pools_and_come_back():
    """torch.set_num_threads leaves OpenBLAS at a thread per core, 10-30× slower on a shared machine for the
    leak metrics' numpy work (vfl/runtime/threads.py); the BLAS pools follow, and the settings come back."""
    import numpy as np
    import torch
    from threadpoolctl import threadpool_info

    from vfl.runtime.threads import set_compute_threads

    np.linalg.svd(np.ones((4, 4)))  # numpy's BLAS loaded
    blas = lambda: sorted(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")  # noqa: E731
    before, torch_before = blas(), torch.get_num_threads()
    assert before
    restore = set_compute_threads(1)
    try:
        assert blas() == [1] * len(before) and torch.get_num_threads() == 1
    finally:
        restore()
    assert blas() == before and torch.get_num_threads() == torch_before
