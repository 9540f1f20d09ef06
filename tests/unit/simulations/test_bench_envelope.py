"""The envelope benchmark (#29.2): its information bound per message, and a run whose every counted
message was read, with the wire never below the bound."""

from __future__ import annotations

import numpy as np
from flwr.common import ConfigRecord

from parties.vertical import wire as vw
from simulations.benchmarks.envelope import information_bytes
from vfl.runtime import message as vm


def test_information_counts_arrays_at_wire_precision_and_byte_strings_only() -> None:
    packed = vm.arrays(**{vw.Array.PACKED: np.zeros(90, dtype=np.uint8)})  # 10 x 12 values of 6 bits
    enc = vm.config(**{vw.Key.BITS: 6, vw.Key.ROWS: 10, vw.Key.COLS: 12, vw.Key.MASKED: True})
    grad = vm.arrays(g=np.zeros((10, 12), dtype=np.float64))  # float64 on the wire: bound at float32
    sa = ConfigRecord({"r": "train:0:1", "n": ["emb"], "z": [b"\x01" * 33, b"\x02" * 7], "pk": b"k" * 32, "i": 5})
    m = vm.make("train.forward", src=1, dst=0, round="train:0:1",
                content=vm.records(emb=packed, enc=enc, grad=grad, sa=sa))
    assert information_bytes(m) == {"arrays": 90 + 10 * 12 * 4, "config_bytes": 33 + 7 + 32, "metrics": 0}
    ints = vm.make("train.forward", src=1, dst=0, round="train:0:1", content=vm.records(
        emb=vm.arrays(**{vw.Array.INTS: np.zeros((10, 12), dtype=np.uint32)}), enc=enc))
    assert information_bytes(ints)["arrays"] == 90  # unpacked integers still bound at k bits


