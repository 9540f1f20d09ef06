"""Per-party files: reading (CSV, Parquet), one DataError per bad file naming file and column, the
config checks, and the split_parties export (partial shuffled overlap, exact float round trip)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest

import strategies  # noqa: F401
from simulations.data.party_tables import PartyTableSource, read_label_table, read_party_table
from simulations.data.source import make_data_source
from simulations.data.split_parties import ID, _memberships, main
from tests.support.party_data import write_blob_parties
from vfl.config.party_files import LabelFile, PartyFile
from vfl.core.errors import ConfigError, DataError
from vfl.core.rng import seeded_numpy
from vfl.engine.schema import load_run_config


def _party(tmp_path, frame, name="p.csv", **kw):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return read_party_table(PartyFile(path=str(path), id="cid", **kw), key="data.parties[0]")


def test_reads_ids_as_strings_and_the_numeric_columns(tmp_path):
    t = _party(tmp_path, pd.DataFrame({"cid": ["007", "8"], "a": [1.5, 2.0], "b": [3, 4]}))
    assert list(t.ids) == ["7", "8"] and t.columns  # canonical_id: "007" and "7" are one ID == ("a", "b") and t.x.dtype == np.float32
    np.testing.assert_array_equal(t.x, [[1.5, 3], [2, 4]])
    only = _party(tmp_path, pd.DataFrame({"cid": [1, 2], "a": [1, 2], "b": [3, 4]}), columns=("b",))
    assert only.columns == ("b",) and list(only.ids) == ["1", "2"]


@pytest.mark.parametrize("frame,kw,match", [
    (pd.DataFrame({"id": ["a"], "x": [1]}), {}, r"p\.csv: no id column 'cid' \(data\.parties\[0\]\.id\)"),
    (pd.DataFrame({"cid": ["a", "b", "a"], "x": [1, 2, 3]}), {}, r"duplicate IDs in column 'cid' \(rows 0, 2\)"),
    (pd.DataFrame({"cid": ["a", "b"], "x": ["red", "blue"]}), {}, r"column 'x' is not numeric"),
    (pd.DataFrame({"cid": ["a", "b"], "x": [1.0, None]}), {}, r"column 'x' has missing values \(row 1, empty or NaN\)"),
    (pd.DataFrame({"cid": ["a", "b"], "x": [1, 2]}), {"columns": ("y",)}, r"no column 'y' \(data\.parties\[0\]\.columns\)"),
    (pd.DataFrame({"cid": ["a", "b"]}), {}, r"no feature column besides the id column 'cid'"),
    (pd.DataFrame({"cid": ["a", None], "x": [1, 2]}), {}, r"id column 'cid' is empty in row 1"),
])
def test_bad_party_files_are_one_clear_data_error(tmp_path, frame, kw, match):
    with pytest.raises(DataError, match=match) as exc:
        _party(tmp_path, frame, **kw)
    assert str(tmp_path / "p.csv") in str(exc.value) and "\n" not in str(exc.value)


def test_missing_and_unsupported_files(tmp_path):
    with pytest.raises(DataError, match=r"nope\.csv: file not found \(data\.parties\[0\]\.path\)"):
        read_party_table(PartyFile(path=str(tmp_path / "nope.csv"), id="cid"), key="data.parties[0]")
    (tmp_path / "t.xlsx").write_text("x")
    with pytest.raises(DataError, match=r"unsupported file type '\.xlsx'.*allowed: \.csv, \.parquet"):
        read_party_table(PartyFile(path=str(tmp_path / "t.xlsx"), id="cid"), key="data.parties[0]")


def test_label_file_checks_and_split(tmp_path):
    path = tmp_path / "l.csv"

    def read(frame, **kw):
        frame.to_csv(path, index=False)
        return read_label_table(LabelFile(path=str(path), id="cid", **kw))

    lab = read(pd.DataFrame({"cid": ["a", "b", "c", "d"], "y": ["cat", "dog", "cat", "dog"],
                             "s": ["train", "TEST", "train", "train"]}), label="y", split="s")
    assert list(lab.y) == [0, 1, 0, 1] and lab.class_names == ("cat", "dog")
    assert list(lab.is_test) == [False, True, False, False]
    with pytest.raises(DataError, match=r"no label column 'label' \(data\.labels\.label\)"):
        read(pd.DataFrame({"cid": ["a"], "y": [1]}), label="label")
    with pytest.raises(DataError, match=r"split column 's' holds \['valid'\]; allowed: train, test"):
        read(pd.DataFrame({"cid": ["a", "b"], "y": [0, 1], "s": ["train", "valid"]}), label="y", split="s")
    with pytest.raises(DataError, match="single class"):
        read(pd.DataFrame({"cid": ["a", "b"], "y": [1, 1]}), label="y")


def test_parquet_files_are_read_and_a_missing_pyarrow_is_one_clear_line(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"cid": ["x1", "x2"], "a": [0.25, 0.5]})
    frame.to_parquet(tmp_path / "p.parquet")
    t = read_party_table(PartyFile(path=str(tmp_path / "p.parquet"), id="cid"), key="data.parties[0]")
    assert list(t.ids) == ["x1", "x2"] and t.x.tolist() == [[0.25], [0.5]]
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    with pytest.raises(DataError, match=r"reading Parquet needs pyarrow: pip install -e '\.\[parquet\]'"):
        read_party_table(PartyFile(path=str(tmp_path / "p.parquet"), id="cid"), key="data.parties[0]")


def test_relative_paths_resolve_against_the_data_dir(tmp_path):
    src = PartyTableSource.from_files((PartyFile(path="a.csv", id="i"),), LabelFile(path="l.csv", id="i", label="y"),
                                      data_dir=str(tmp_path))
    assert src.parties[0].path == str(tmp_path / "a.csv") and src.labels.path == str(tmp_path / "l.csv")
    with pytest.raises(DataError, match="aligned by PSI"):
        src.partition()


@pytest.mark.parametrize("data,extra,key", [
    ({"parties": [{"path": "a.csv", "id": "i"}] * 2}, {}, "data.labels"),
    ({"parties": [{"path": "a.csv", "id": "i"}], "labels": {"path": "l.csv", "id": "i", "label": "y"}}, {},
     "num_parties"),
    ({"split_parties": {"overlap": 0.5}, "labels": {"path": "l.csv", "id": "i", "label": "y"}}, {},
     "data.split_parties"),
    ({"split_parties": {}}, {"strategy": "sap", "num_parties": 1}, "data.parties"),
    ({"split_parties": {"overlap": 1.5}}, {}, "data.split_parties.overlap"),
])
def test_config_errors_name_the_key(data, extra, key):
    with pytest.raises(ConfigError) as exc:
        make_data_source(load_run_config({"num_parties": 2, "data": data, **extra}))
    assert exc.value.key == key, str(exc.value)


def test_memberships_hold_the_core_everywhere_and_nothing_else_everywhere():
    hold = _memberships(1000, 5, 0.8, seeded_numpy("t"))
    assert hold.all(axis=1).sum() == 800
    assert 0.3 < hold[~hold.all(axis=1)].mean() < 0.6  # the rest: random proper subsets


def test_export_writes_shuffled_files_with_partial_overlap_and_exact_floats(tmp_path):
    data, blobs = write_blob_parties(tmp_path, num_parties=2, overlap=0.5, seed=3)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    n = blobs.num_train + blobs.num_test
    assert manifest["intersection_size"] == n // 2 and manifest["num_parties"] == 2
    p0 = pd.read_csv(tmp_path / "party0.csv", dtype={ID: str})
    lab = pd.read_csv(tmp_path / "labels.csv", dtype={ID: str})
    assert list(p0[ID]) != sorted(p0[ID]) and len(p0) < n and set(lab["split"]) == {"train", "test"}
    assert all(k.startswith("cust-") and len(k) == 11 for k in p0[ID])
    shards, _ = blobs.partition()
    full = np.concatenate([shards[0].x_train, shards[0].x_test])
    rows = {r.tobytes() for r in full}
    assert all(r.tobytes() in rows for r in read_party_table(data.parties[0], key="k").x)  # float32 exact


def test_split_parties_cli(tmp_path, capsys):
    out = tmp_path / "digits"
    assert main(["digits", str(out), "--overlap", "0.8", "--parties", "4"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["dataset"] == "digits" and m["num_samples"] == 1797 and m["intersection_size"] == round(0.8 * 1797)
    assert [p["num_columns"] for p in m["parties"]] == [16, 16, 16, 16]
    assert "vfl run" in capsys.readouterr().out
    cfg = load_run_config(__import__("yaml").safe_load((out / "config.yaml").read_text()))
    assert len(cfg.data.parties) == 4 and cfg.data.labels.split == "split"
    assert main(["digits", str(out)]) == 2  # never overwrites
    assert main(["digits", str(tmp_path / "x"), "--overlap", "0"]) == 2
    assert main(["nope", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err
    assert "already holds party files" in err and "--overlap" in err and "dataset" in err


# ---- issue 47, item 5: inputs that were a traceback, silently lost samples or a misleading line --------------
def test_an_empty_split_cell_is_one_line(tmp_path):
    """Under pandas 3 an empty ``split`` cell was a 61-line traceback (NaN among the strings)."""
    path = tmp_path / "labels.csv"
    path.write_text("cid,label,split\na,0,train\nb,1,\nc,1,test\nd,0,train\ne,1,train\n")
    with pytest.raises(DataError, match=r"labels.csv: split column 'split' is empty in row 1; allowed: train, test"):
        read_label_table(LabelFile(path=str(path), id="cid", label="label", split="split"))
    path.write_text("cid,label,split\na,0,train\nb,1,train\nc,1,test\nd,0,train\ne,1,train\n")  # control
    assert read_label_table(LabelFile(path=str(path), id="cid", label="label", split="split")).is_test.sum() == 1


def test_ids_in_nfd_or_with_invisible_characters_match_and_are_counted(tmp_path, caplog):
    """The same IDs exported by two parties, one in NFD and with zero-width spaces: before, 2 of 3 never matched
    (PSI compared the bytes), silently. Now both are NFC without invisible characters, and the count is said."""
    nfc, nfd = ["José", "Zoë", "plain"], ["Jose\u0301", "Zo\u200be\u0308", "plain"]
    a = _party(tmp_path, pd.DataFrame({"cid": nfc, "x": [1, 2, 3]}), name="a.csv")
    with caplog.at_level("WARNING"):
        b = _party(tmp_path, pd.DataFrame({"cid": nfd, "x": [1, 2, 3]}), name="b.csv")
    assert list(a.ids) == list(b.ids) == nfc
    (line,) = [r.getMessage() for r in caplog.records if "normalised" in r.getMessage()]
    assert "2 of 3 ID(s) in column 'cid' normalised before matching" in line and "José" not in line


def test_a_directory_given_as_a_data_file_says_so(tmp_path):
    (tmp_path / "p.csv").mkdir()
    with pytest.raises(DataError, match=r"p.csv: is a directory; give the party's table file"):
        read_party_table(PartyFile(path=str(tmp_path / "p.csv"), id="cid"), key="data.parties[0]")


def test_a_ragged_csv_row_is_one_line(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("cid,x\na,1\nb,2,3\n")
    with pytest.raises(DataError) as exc:
        read_party_table(PartyFile(path=str(path), id="cid"), key="data.parties[0]")
    assert "\n" not in str(exc.value) and "Expected 2 fields in line 3, saw 3" in str(exc.value)


def test_a_label_file_read_as_a_partys_table_must_name_its_feature_columns(tmp_path):
    """The label holder may keep labels and its own columns in one file; read whole, the label would be a feature."""
    pd.DataFrame({"id": ["a", "b"], "y": [0, 1], "f": [0.5, 1.5]}).to_csv(tmp_path / "active.csv", index=False)
    labels = LabelFile(path=str(tmp_path / "active.csv"), id="id", label="y")
    for columns in ((), ("f", "y")):
        with pytest.raises(ConfigError, match=r"data.parties\[0\].columns: .* also the label file.*'y'"):
            PartyTableSource.from_files((PartyFile(path=str(tmp_path / "active.csv"), id="id", columns=columns),),
                                        labels)
    source = PartyTableSource.from_files((PartyFile(path=str(tmp_path / "active.csv"), id="id", columns=("f",)),),
                                         labels)
    assert source.party_table(0).columns == ("f",)
