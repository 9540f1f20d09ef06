"""The runtime's Python work per training step against the protocol's floor, counted, not timed (#29.1).

A paired wall-clock ratio moves by ±0.03-0.05 per run with the load of a shared machine, more than most
single cuts save. These counts do not move: Python bytecode instructions (``sys.settrace`` with
``f_trace_opcodes``) and function calls (cProfile) of epoch 1 of an in-process run and of a ``wire_floor``
epoch (``simulations/benchmarks/floors.py``) on the same config, per training step, and the functions
that make up the difference (negative: work the floor does that the runtime does not).

    python -m simulations.benchmarks.step_ops [--set k=v ...] [--top 40]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from simulations.benchmarks.floors import initial_models, split_epoch_times
from simulations.benchmarks.overhead import DEFAULTS, synthetic_har
from simulations.cli.runner import resolve_config
from simulations.data.source import ConfigDataSource
from vfl.engine.engine import Engine
from vfl.engine.schema import RunConfig
from vfl.runtime.transport.inprocess import InProcessTransport


class Counts:
    """Opcodes per function (file:name) and the cProfile calls of what ran between ``on`` and ``off``."""

    def __init__(self) -> None:
        self.ops: collections.Counter[Any] = collections.Counter()
        self.profile = cProfile.Profile()
        self._before: Any = None  # the trace function in place before ``on`` (put back by ``off``)

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        frame.f_trace_opcodes = True
        if event == "opcode":
            self.ops[frame.f_code] += 1
        return self._trace

    def on(self) -> None:
        self._before = sys.gettrace()
        self.profile.enable()
        sys.settrace(self._trace)

    def off(self) -> None:
        sys.settrace(self._before)
        self.profile.disable()

    def by_function(self) -> collections.Counter[str]:
        out: collections.Counter[str] = collections.Counter()
        for code, n in self.ops.items():
            out[f"{os.path.basename(code.co_filename)}:{code.co_name}"] += n
        return out

    def calls(self) -> int:
        return int(pstats.Stats(self.profile).total_calls)  # type: ignore[attr-defined]


def count_epochs(cfg: RunConfig, data: ConfigDataSource) -> tuple[Counts, Counts, int]:
    """(the in-process run's counts, the floor's, steps per epoch), each over its epoch 1 of 3."""
    run, floor = Counts(), Counts()

    def hook(epoch: int, record: dict[str, Any], engine: Engine) -> None:
        if epoch == 0:
            run.on()
        elif epoch == 1:
            run.off()

    engine = Engine(cfg, InProcessTransport(), data, progress=False, on_epoch_end=hook)
    try:
        engine.run()
    finally:
        engine.transport.shutdown()
    bottoms, head = initial_models(cfg, data)
    epochs: Iterator[float] = split_epoch_times(cfg, data, 3, bottoms=bottoms, head=head, wire_floor=True)
    next(epochs)
    floor.on()
    next(epochs)
    floor.off()
    steps = -(-len(data.partition()[1].y_train) // cfg.train.batch_size)
    return run, floor, steps


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--data-dir", default="bench-out/data", help="where the HAR-shaped data is (written once)")
    ap.add_argument("--top", type=int, default=40, help="functions listed by their share of the difference")
    args = ap.parse_args(argv)
    cfg = resolve_config(None, [*DEFAULTS, f"data.data_dir={synthetic_har(Path(args.data_dir))}", *args.overrides,
                                "train.epochs=3"])
    import torch

    torch.set_num_threads(cfg.train.threads_per_actor)
    run, floor, steps = count_epochs(cfg, ConfigDataSource.from_config(cfg))
    a, b = run.by_function(), floor.by_function()
    out = {"inprocess_ops_per_step": sum(a.values()) / steps, "wire_floor_ops_per_step": sum(b.values()) / steps,
           "inprocess_calls_per_step": run.calls() / steps, "wire_floor_calls_per_step": floor.calls() / steps}
    print(" ".join(f"{k} {v:.0f}" for k, v in out.items()))
    diff = sorted(((a[k] - b[k]) / steps, k) for k in a.keys() | b.keys())
    for d, k in sorted(diff, key=lambda x: -abs(x[0]))[:args.top]:
        print(f"{d:8.1f}  {k}")
    return out


if __name__ == "__main__":
    main()
