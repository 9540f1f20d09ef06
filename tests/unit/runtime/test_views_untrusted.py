"""A run directory is untrusted input: a crafted or damaged ``views/`` never writes outside the
run directory and never ends in a traceback (one ``DataError`` naming the file)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vfl.core.errors import DataError
from vfl.runtime.views import ViewPolicy, load_views, write_views

_META = {"src": 1, "kind": "train.forward", "round": "train:0:0", "record": "emb", "name": "e", "config": {},
         "derived": False}


def _write(root, epoch=0):
    exp = {0: {"entries": [{**_META, "round": f"train:{epoch}:0"}], "arrays": [np.full((2, 2), epoch)],
               "dropped": 0}}
    write_views(root / "views", exp, names={0: "server"}, roles={0: "server"}, policy=ViewPolicy(max_bytes=1 << 20))


def _craft(root, file_name):
    index_path = root / "views" / "index.json"
    index = json.loads(index_path.read_text())
    index["nodes"]["server"]["file"] = file_name
    index_path.write_text(json.dumps(index))


@pytest.mark.parametrize("crafted", ["../outside.npz", "/tmp/abs-outside.npz", "sub/inner.npz", "..", ""])
def test_a_crafted_index_never_reaches_outside_the_run_directory(tmp_path, crafted):
    run = tmp_path / "run"
    _write(run, 0)
    _craft(run, crafted)
    with pytest.raises(DataError, match="not a plain file name"):
        load_views(run)
    with pytest.raises(DataError, match="not a plain file name"):
        _write(run, 1)  # a resume appending to the views reads the index first
    assert not (tmp_path / "outside.npz").exists()
    assert sorted(p.name for p in (run / "views").iterdir()) == ["index.json", "server.npz"]


def test_the_control_a_plain_name_is_read(tmp_path):
    _write(tmp_path, 0)
    _write(tmp_path, 1)
    assert [e["epoch"] for e in load_views(tmp_path)["server"].entries] == [0, 1]


@pytest.mark.parametrize("damage", ["truncate_npz", "garbage_index", "index_is_a_list", "missing_entries"])
def test_a_damaged_views_folder_is_one_line(tmp_path, damage):
    _write(tmp_path, 0)
    views = tmp_path / "views"
    if damage == "truncate_npz":
        data = (views / "server.npz").read_bytes()
        (views / "server.npz").write_bytes(data[: len(data) // 2])
    elif damage == "garbage_index":
        (views / "index.json").write_text("{not json")
    elif damage == "index_is_a_list":
        (views / "index.json").write_text("[1, 2]")
    else:
        index = json.loads((views / "index.json").read_text())
        del index["nodes"]["server"]["entries"]
        (views / "index.json").write_text(json.dumps(index))
    with pytest.raises(DataError) as info:
        server = load_views(tmp_path)["server"]
        server.array(server.entries[0]["key"])
    assert "\n" not in str(info.value) and str(views) in str(info.value)
