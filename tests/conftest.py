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


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory):
    """``tiny_lm(family, dtype=...)``: a random tiny LM saved locally (``parties/llm/common/tiny.py``), built once
    per session and shared read-only by every test that asks for the same one."""
    from parties.llm.common.tiny import tiny_lm_dir

    made: dict[tuple[str, str], str] = {}

    def get(family: str, *, dtype: str = "fp32") -> str:
        if (family, dtype) not in made:
            made[family, dtype] = tiny_lm_dir(tmp_path_factory.mktemp(f"{family}-{dtype}"), family, dtype=dtype)
        return made[family, dtype]

    return get


@pytest.fixture(scope="session")
def llama(tiny_lm):
    """The tiny float32 Llama most split-LLM tests run on."""
    return tiny_lm("llama")


@pytest.fixture(scope="session")
def t5(tiny_lm):
    """A tiny T5 (encoder-decoder)."""
    return tiny_lm("t5")


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory):
    """A 2-block, 16-wide BERT with the packaged MiniLM tokenizer (``tests/support/wire_tap.py``), built once."""
    from tests.support.wire_tap import tiny_model_dir

    return tiny_model_dir(tmp_path_factory.mktemp("tiny-bert"))
