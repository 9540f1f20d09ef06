"""Views recorded before the #29.2 wire vocabulary (long config key names) still decode.

An old-format view file (``rows``/``cols``/``masked`` in the ``enc`` record, as runs before commit
7bb5874 wrote them) is written with the real writer, read back with ``load_views`` and decoded by
``simulations.report.observe``; the same values as from a file with today's keys."""

from __future__ import annotations

import numpy as np
import pytest

from parties.vertical import wire as vw
from simulations.report import observe
from vfl.core.errors import DataError
from vfl.runtime.views import ViewPolicy, load_views, write_views
from vfl.secagg import pack_bits

K, ROWS, COLS = 5, 3, 4
OLD_ENC = {vw.Key.BITS: K, "rows": ROWS, "cols": COLS, "masked": False}  # pre-#29.2 names ("k" is unchanged)
NEW_ENC = {vw.Key.BITS: K, vw.Key.ROWS: ROWS, vw.Key.COLS: COLS, vw.Key.MASKED: False}


def _write(root, enc: dict, values: np.ndarray) -> None:
    meta = {"src": vw.party_node_id(0), "kind": vw.Kind.TRAIN_FORWARD, "round": "train:0:2", "record": vw.Record.EMB,
            "name": vw.Array.PACKED, "config": {vw.Record.STEP: {"epoch": 0, "step": 2, "forward": True, "grad_step": -1},
                                                vw.Record.ENC: enc}, "derived": False}
    packed = np.frombuffer(pack_bits(values.ravel(), K), np.uint8)
    write_views(root / "views", {0: {"entries": [meta], "arrays": [packed], "dropped": 0}}, names={0: "server"},
                roles={0: "server"}, policy=ViewPolicy(max_bytes=1 << 20))


def _decoded(root) -> tuple[str, np.ndarray]:
    ((entry, arr),) = load_views(root)["server"].select(kind=vw.Kind.TRAIN_FORWARD, record=vw.Record.EMB)
    return observe.decode_entry(entry, arr)


@pytest.mark.parametrize("masked", [False, True])
def test_an_old_format_view_file_decodes_like_a_new_one(tmp_path, masked):
    values = np.arange(ROWS * COLS, dtype=np.int64).reshape(ROWS, COLS) % (1 << K)
    _write(tmp_path / "old", {**OLD_ENC, "masked": masked}, values)
    _write(tmp_path / "new", {**NEW_ENC, vw.Key.MASKED: masked}, values)
    ((old_entry, _),) = load_views(tmp_path / "old")["server"].select(record=vw.Record.EMB)
    with pytest.raises(KeyError):  # control: the lookup by today's names alone cannot read the old file
        old_entry["config"][vw.Record.ENC][vw.Key.ROWS]
    kind, got = _decoded(tmp_path / "old")
    assert kind == ("masked" if masked else "int") and np.array_equal(got, values)
    assert _decoded(tmp_path / "new")[0] == kind and np.array_equal(_decoded(tmp_path / "new")[1], values)
    step = old_entry["config"][vw.Record.STEP]
    assert [observe.recorded(step, k) for k in (vw.Key.EPOCH, vw.Key.STEP, vw.Key.FORWARD)] == [0, 2, True]


def test_a_record_with_neither_name_is_a_typed_error(tmp_path):
    _write(tmp_path, {vw.Key.BITS: K, vw.Key.ROWS: ROWS}, np.zeros((ROWS, COLS), np.int64))
    with pytest.raises(DataError, match="without key 'c' .or its old name 'cols'"):
        _decoded(tmp_path)
