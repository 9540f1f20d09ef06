"""The one boundary between the code and its measured speed-ups (``vfl/runtime/fast/``, docs/performance.md).

Each speed-up gives the same objects, bytes and parameters as the plain flwr/torch code it replaces
(their tests compare the two). Code outside ``vfl/runtime/fast/`` takes them from here only: the fast
one where that folder is present and ``VFL_PLAIN`` does not name it, else the plain code below, so
deleting the folder leaves a project that runs on plain flwr and torch. ``VFL_PLAIN=1`` (or ``all``), or a comma list of ``records``, ``torch_light``, ``torch_step``,
``party_batch``, turns speed-ups off for a measurement (``python -m simulations.benchmarks.speedups``);
a Ray host gets the variable from the driver.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Sequence
from typing import Any

from flwr.app.message.message import make_message
from flwr.common import Array, ArrayRecord, ConfigRecord, Message, Metadata, RecordDict, serde

from vfl.core.errors import ConfigError

PLAIN_ENV = "VFL_PLAIN"
SPEEDUPS = ("records", "torch_light", "torch_step", "party_batch")


def plain_set(value: str | None) -> frozenset[str]:
    """The speed-ups ``VFL_PLAIN`` turns off: none when unset or ``0``, all for ``1``/``all``, else the named ones."""
    v = (value or "").strip()
    if v in ("", "0"):
        return frozenset()
    if v in ("1", "all"):
        return frozenset(SPEEDUPS)
    names = frozenset(x.strip() for x in v.split(",") if x.strip())
    if unknown := sorted(names - set(SPEEDUPS)):
        raise ConfigError(PLAIN_ENV, f"unknown speed-up {', '.join(unknown)}; allowed: 1, all or a comma list of "
                          f"{', '.join(SPEEDUPS)}")
    return names


PLAIN = plain_set(os.environ.get(PLAIN_ENV))


def _fast(name: str) -> Any:
    """The module ``vfl.runtime.fast.<name>``, or None where it is turned off or absent."""
    if name in PLAIN:
        return None
    try:
        return importlib.import_module(f"vfl.runtime.fast.{name}")
    except ImportError:
        return None


def enabled(name: str) -> bool:
    """Whether the speed-up ``name`` (one of ``SPEEDUPS``) is on in this process."""
    return name not in PLAIN


# ---- flwr records built and decoded without re-validation (vfl/runtime/fast/records.py) ------------
_records = _fast("records")
if _records is not None and _records.path() == _records.DIRECT:
    new_metadata = _records.new_metadata
    new_message = _records.new_message
    new_array = _records.new_array
    array_record = _records.array_record
    config_record = _records.config_record
    record_dict = _records.record_dict
    message_from_proto = _records.message_from_proto
else:
    def new_metadata(*, run_id: int, message_id: str, src_node_id: int, dst_node_id: int, reply_to_message_id: str,
                     group_id: str, created_at: float, ttl: float, message_type: str) -> Metadata:
        return Metadata(run_id, message_id, src_node_id, dst_node_id, reply_to_message_id, group_id, created_at, ttl,
                        message_type)

    def new_message(metadata: Metadata, content: RecordDict) -> Message:
        return make_message(metadata, content)

    def new_array(dtype: str, shape: tuple[int, ...], stype: str, data: bytes) -> Array:
        return Array(dtype=dtype, shape=tuple(shape), stype=stype, data=data)

    def array_record(items: dict[str, Array]) -> ArrayRecord:
        return ArrayRecord(items)

    def config_record(items: dict[str, Any]) -> ConfigRecord:
        return ConfigRecord(items)

    def record_dict(items: dict[str, Any]) -> RecordDict:
        return RecordDict(items)

    def message_from_proto(proto: Any) -> Message:
        return serde.message_from_proto(proto)


# ---- torch without the torch._dynamo and sympy imports (vfl/runtime/fast/torch_light.py) -----------
_light = _fast("torch_light")
if _light is not None:
    skip_dynamo_import = _light.skip_dynamo_import
    backward = _light.backward
else:
    def skip_dynamo_import() -> int:
        return 0

    def backward(outputs: Sequence[Any], grads: Sequence[Any]) -> None:
        import torch

        torch.autograd.backward(list(outputs), list(grads))


# ---- one optimizer step for a host's parties, mode flags (vfl/runtime/fast/torch_step.py) -------------
_step = _fast("torch_step")
if _step is not None:
    set_mode = _step.set_mode
    module_hook = _step.module_hook
    zero_grads = _step.zero_grads
    step_all = _step.step_all
    fused_step = _step.fused_step
else:
    def set_mode(module: Any, *, training: bool) -> None:
        module.train(training)

    def module_hook(module: Any, name: str) -> Any:
        return getattr(module, name, None)

    def zero_grads(optimizers: Iterable[Any]) -> None:
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)

    def step_all(optimizers: Iterable[Any]) -> None:
        for opt in optimizers:
            opt.step()

    def fused_step(optimizers: Iterable[Any]) -> bool:
        return False
