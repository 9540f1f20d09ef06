"""The compute threads of a process: torch's intra-op pool and the BLAS pools numpy, scipy and
scikit-learn use (``threadpoolctl``, a scikit-learn dependency), set together.

torch.set_num_threads leaves OpenBLAS at one thread per core. On a machine whose cores other processes
also use, OpenBLAS's spinning threads make small numpy work (the split-LLM leak metrics' SVDs, k-means and
probes on a few hundred rows) 10-30× slower than one thread (measured: 1,200 rows × 384 of the leak
scoring, 8.2 s with the default pool against 0.26 s with one thread, on 2 shared cores)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def set_compute_threads(threads: int) -> Callable[[], None]:
    """torch and the BLAS pools to ``threads`` threads; returns what restores the previous settings. (OpenMP's
    pool is torch's own: torch.set_num_threads sets it; limiting it here too would undo a restore.)"""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    limits: Any = None
    try:
        from threadpoolctl import threadpool_limits

        limits = threadpool_limits(limits=threads, user_api="blas")  # OpenMP's pool is torch's: set above
    except ImportError:  # without scikit-learn's threadpoolctl the BLAS pools keep their size
        pass

    def restore() -> None:
        if limits is not None:
            limits.restore_original_limits()
        torch.set_num_threads(before)

    return restore
