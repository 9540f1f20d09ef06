"""``VFL_PLAIN``: which speed-ups a process turns off (vfl/runtime/accel.py), a bad value is one line, and the plain
flwr/torch code it falls back to builds the same messages and trains the same bits."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

import numpy as np
import pytest
import torch
from flwr.common import serde

from vfl.core.errors import ConfigError
from vfl.runtime import accel
from vfl.runtime.accel import PLAIN_ENV, SPEEDUPS, plain_set


def test_the_grammar() -> None:
    assert plain_set(None) == plain_set("") == plain_set("0") == frozenset()
    assert plain_set("1") == plain_set("all") == frozenset(SPEEDUPS)
    assert plain_set(" records , party_batch ") == {"records", "party_batch"}
    with pytest.raises(ConfigError, match=rf"^{PLAIN_ENV}: unknown speed-up pbwire; allowed: 1, all or a comma list"):
        plain_set("records,pbwire")


def _accel_copy(monkeypatch: pytest.MonkeyPatch, *, plain: str | None, fast_folder: bool = True) -> ModuleType:
    """A private copy of ``vfl.runtime.accel`` as a process with ``VFL_PLAIN=plain`` (or without ``fast/``) has it;
    the process's own module is left as it is."""
    if plain is None:
        monkeypatch.delenv(PLAIN_ENV, raising=False)
    else:
        monkeypatch.setenv(PLAIN_ENV, plain)
    if not fast_folder:
        real = importlib.import_module

        def no_fast(name: str, package: str | None = None) -> ModuleType:
            if name.startswith("vfl.runtime.fast."):
                raise ImportError(f"No module named {name!r}")
            return real(name, package)

        monkeypatch.setattr(importlib, "import_module", no_fast)
    spec = importlib.util.spec_from_file_location("accel_copy", accel.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bytes(a: ModuleType) -> bytes:
    """A message built through ``a``'s record constructors, as flwr serializes it."""
    arr = a.new_array("<f4", (2,), "raw", np.arange(2, dtype="<f4").tobytes())
    content = a.record_dict({"emb": a.array_record({"x": arr}), "step": a.config_record({"epoch": 1, "flag": True})})
    meta = a.new_metadata(run_id=1, message_id="", src_node_id=2, dst_node_id=3, reply_to_message_id="", group_id="7",
                          created_at=1.5, ttl=60.0, message_type="train")
    message = a.new_message(meta, content)
    again = a.message_from_proto(serde.message_to_proto(message))
    assert serde.message_to_proto(again) == serde.message_to_proto(message)
    return bytes(serde.message_to_proto(message).SerializeToString())


def _train(a: ModuleType) -> list[torch.Tensor]:
    """Two SGD parties stepped through ``a``'s torch helpers: their parameters after two steps."""
    torch.manual_seed(0)
    models = [torch.nn.Linear(3, 2) for _ in range(2)]
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in models]
    for _ in range(2):
        for m in models:
            a.set_mode(m, training=True)
        a.zero_grads(opts)
        outs = [m(torch.ones(4, 3)) for m in models]
        a.backward(outs, [torch.ones_like(o) for o in outs])
        if not a.fused_step(opts):
            a.step_all(opts)
    assert a.module_hook(models[0], "no_such_hook") is None and a.module_hook(models[0], "weight") is models[0].weight
    return [p.detach().clone() for m in models for p in m.parameters()]


@pytest.mark.parametrize(("plain", "fast_folder"), [("all", True), (None, False)], ids=["VFL_PLAIN=all", "no-fast"])
def test_the_plain_code_builds_the_same_messages_and_trains_the_same_bits(monkeypatch, plain, fast_folder) -> None:
    fast = _accel_copy(monkeypatch, plain=None)
    slow = _accel_copy(monkeypatch, plain=plain, fast_folder=fast_folder)
    assert slow.PLAIN == (frozenset(SPEEDUPS) if plain else frozenset()) and slow.skip_dynamo_import() == 0
    assert not any(getattr(slow, f) is getattr(fast, f) for f in ("new_message", "backward", "step_all"))
    assert _bytes(slow) == _bytes(fast)
    for a, b in zip(_train(slow), _train(fast), strict=True):
        assert torch.equal(a, b)
