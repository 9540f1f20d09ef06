"""Shared fixtures: one local Ray per test session (own temp dir, torn down after)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# `tests` is not an installed package: Ray workers and CLI subprocesses import it (and the code
# under test) from this checkout, first on their path.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)


@pytest.fixture
def one_thread():
    """One torch thread: small models on 2 shared cores only lose to thread contention (MiniLM ~10x)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray (2 CPUs) started for the tests and shut down after; never `ray stop`."""
    import ray

    temp = tempfile.mkdtemp(prefix="vflt-")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, _temp_dir=temp, include_dashboard=False, configure_logging=False, log_to_driver=False)
    yield ray
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def _vfl_cache_dir(tmp_path_factory):
    """Files generated on first use (``data.split_parties``) go to a test temp dir, not ~/.cache."""
    os.environ["VFL_CACHE_DIR"] = str(tmp_path_factory.mktemp("vfl-cache"))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the mark must be there when it looks
def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` the tests measured to dominate the fast lane (``tests/measured_slow.py``)."""
    from tests.measured_slow import MEASURED_SLOW

    for item in items:
        if item.nodeid in MEASURED_SLOW:
            item.add_marker(pytest.mark.slow)
