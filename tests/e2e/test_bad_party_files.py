"""Bad per-party files (``data.parties``, ``data.labels``): each is refused by the actor that reads
it with ONE line naming the file, the column or row and what is allowed, and never a sample ID or
a feature value; IDs are matched in their canonical form (``vfl.config.party_files.canonical_id``); a
party that shares far fewer IDs than it could is a warning and ``psi_warnings`` in summary.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from simulations.cli.main import main
from vfl.config.party_files import canonical_id

FAST = ["--transport", "inprocess", "--no-progress"]
N = 60  # samples; party p holds features p0, p1 of each; the label holder holds y and the split
SECRET_ID = "cust-4242"  # an ID that must never appear in an error line
SECRET_VALUE = 987.125  # a feature value that must never appear in an error line


def _frames(seed: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    ids = [f"cust-{1000 + i}" for i in range(N)]
    ids[7] = SECRET_ID
    y = np.arange(N) % 3
    split = np.where(np.arange(N) < 45, "train", "test")
    out = {"labels": pd.DataFrame({"id": ids, "y": y, "split": split})}
    for p in range(2):
        x = rng.normal(size=(N, 2)) + y[:, None]
        out[f"party{p}"] = pd.DataFrame({"id": ids, f"p{p}a": x[:, 0], f"p{p}b": x[:, 1]})
    out["party1"].loc[3, "p1a"] = SECRET_VALUE
    return out


def _write(tmp_path: Path, frames: dict[str, pd.DataFrame], raw: dict[str, str] | None = None,
           labels: dict | None = None) -> Path:
    """The files and a tiny config over them; ``raw`` replaces a file with the given CSV text."""
    for name, f in frames.items():
        f.to_csv(tmp_path / f"{name}.csv", index=False)
    for name, text in (raw or {}).items():
        (tmp_path / f"{name}.csv").write_text(text)
    cfg = {"strategy": "npq", "num_parties": 2, "seed": 0, "auth": False,
           "data": {"data_dir": str(tmp_path),
                    "parties": [{"path": f"party{p}.csv", "id": "id"} for p in range(2)],
                    "labels": {"path": "labels.csv", "id": "id", "label": "y", "split": "split", **(labels or {})}},
           "model": {"bottom_hidden": [4], "embed_dim": 4, "head_hidden": [4]},
           "train": {"epochs": 1, "batch_size": 16}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "c.yaml"


def _line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    assert SECRET_ID not in err and str(SECRET_VALUE) not in err and "4242" not in err, err
    return err


def _set(name: str, row: int, col: str, value) -> Callable[[dict[str, pd.DataFrame]], None]:
    def edit(f: dict[str, pd.DataFrame]) -> None:
        frame = f[name]
        frame[col] = frame[col].astype(object)  # any value, written to the CSV as given
        frame.loc[row, col] = value
    return edit


def _header(name: str, old: str, new: str) -> Callable[[dict[str, pd.DataFrame]], None]:
    def edit(f: dict[str, pd.DataFrame]) -> None:
        f[name] = f[name].rename(columns={old: new})
    return edit


def _dup_id(name: str, src: int, dst: int, form: Callable[[str], str] = str) -> Callable[[dict], None]:
    def edit(f: dict[str, pd.DataFrame]) -> None:
        f[name]["id"] = f[name]["id"].astype(object)
        f[name].loc[dst, "id"] = form(f[name].loc[src, "id"])
    return edit


def _numeric_ids(f: dict[str, pd.DataFrame]) -> None:
    for frame in f.values():
        frame["id"] = [str(i) for i in range(1, N + 1)]


def _classes_only_in_test(f: dict[str, pd.DataFrame]) -> None:
    f["labels"].loc[50:, "y"] = 9  # class 9: test rows only


CASES = [
    # (what the user did, edit of the frames, extra labels keys, needle in the one line)
    ("inf feature", _set("party1", 3, "p1a", np.inf), None,
     "party1.csv: column 'p1a' holds a non-finite value in row 3"),
    ("-inf feature", _set("party0", 5, "p0b", -np.inf), None,
     "party0.csv: column 'p0b' holds a non-finite value in row 5"),
    ("beyond float32", _set("party0", 2, "p0a", 1e39), None,
     "column 'p0a' holds a non-finite value in row 2 (inf, or beyond float32's +-3.4e38); allowed: finite"),
    ("text NaN feature", _set("party1", 3, "p1a", "NaN"), None,
     "party1.csv: column 'p1a' has missing values (row 3, empty or NaN); allowed: finite numbers"),
    ("empty feature cell", _set("party0", 3, "p0a", None), None, "column 'p0a' has missing values (row 3"),
    ("text in a feature", _set("party1", 3, "p1a", "high"), None, "party1.csv: column 'p1a' is not numeric"),
    ("duplicate id", _dup_id("party0", 7, 9), None, "party0.csv: duplicate IDs in column 'id' (rows 7, 9)"),
    ("duplicate id with spaces", _dup_id("party1", 7, 9, lambda s: f" {s} "), None,
     "party1.csv: duplicate IDs in column 'id' (rows 7, 9)"),
    ("duplicate id in labels", _dup_id("labels", 7, 8), None, "labels.csv: duplicate IDs in column 'id' (rows 7, 8)"),
    ("duplicate column", _header("party0", "p0b", "p0a"), None,
     "party0.csv: column 'p0a' appears twice in the header (columns 1 and 2); allowed: each column once"),
    ("label column given twice", _header("labels", "split", "y"), {"split": None},
     "labels.csv: column 'y' appears twice in the header"),
    ("label outside classes", _set("labels", 11, "y", 7), {"classes": [0, 1, 2]},
     "labels.csv: label column 'y' holds a value outside data.labels.classes in row 11; allowed: 0, 1, 2"),
    ("fractional label", _set("labels", 4, "y", 1.5), None,
     "labels.csv: label column 'y' holds a non-integer number in row 4; allowed: integer class ids"),
    ("inf label", _set("labels", 4, "y", np.inf), None, "label column 'y' holds a non-integer number in row 4"),
    ("class only in test", _classes_only_in_test, None,
     "labels.csv: class '9' of label column 'y' appears only in test rows (split column 'split')"),
    ("empty label", _set("labels", 6, "y", None), None, "label column 'y' is empty in row 6"),
    ("bad split value", _set("labels", 6, "split", "dev"), None, "split column 'split' holds ['dev']"),
]


@pytest.mark.parametrize("what,edit,labels,needle", CASES, ids=[c[0] for c in CASES])
def test_bad_party_file_is_one_line(what, edit, labels, needle, tmp_path, capsys):
    frames = _frames()
    edit(frames)
    cfg = _write(tmp_path, frames, labels=labels)
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), *FAST]) == 2, what
    line = _line(capsys)
    assert line.startswith("vfl: error: ") and needle in line, line
    assert not (tmp_path / "r").exists()


CONFIG_CASES = [
    ({"label": "id"}, "data.labels: label: 'id' is given twice; allowed: each column among id, label and split once"),
    ({"split": "y"}, "data.labels: label: 'y' is given twice"),
    ({"classes": [0, 1, 1]}, "data.labels: classes: '1' is given twice; allowed: each class once"),
]


@pytest.mark.parametrize("labels,needle", CONFIG_CASES)
def test_conflicting_label_keys_fail_the_dry_run(labels, needle, tmp_path, capsys):
    cfg = _write(tmp_path, _frames(), labels=labels)
    assert main(["run", str(cfg), "--dry-run", *FAST]) == 2
    assert needle in _line(capsys)


def test_repeated_feature_column_in_the_config(tmp_path, capsys):
    cfg = _write(tmp_path, _frames())
    text = yaml.safe_load(cfg.read_text())
    text["data"]["parties"][0]["columns"] = ["p0a", "p0a"]
    cfg.write_text(yaml.safe_dump(text))
    assert main(["run", str(cfg), "--dry-run", *FAST]) == 2
    assert "data.parties[0]: columns: 'p0a' is given twice" in _line(capsys)


@pytest.mark.parametrize("raw,canon", [("007", "7"), (" 7 ", "7"), ("7.0", "7"), ("000", "0"), ("7", "7"),
                                       ("7.5", "7.5"), ("cust-007", "cust-007"), ("AbC", "AbC"), ("-7", "-7")])
def test_canonical_id(raw, canon):
    assert canonical_id(raw) == canon


def test_zero_padded_ids_in_one_party_meet_plain_ids_in_another(tmp_path, capsys):
    """The probe's case: IDs written 007 by one party and 7 by the others used to shrink the
    intersection silently; now every sample is aligned (control: the raw strings differ)."""
    frames = _frames()
    _numeric_ids(frames)
    frames["party1"]["id"] = [f"{int(i):05d}" for i in frames["party1"]["id"]]  # 00001 .. 00060
    assert set(frames["party1"]["id"]).isdisjoint(frames["party0"]["id"])  # control: no raw match at all
    cfg = _write(tmp_path, frames)
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), *FAST]) == 0
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["psi_intersection_size"] == N and s["psi_warnings"] == []
    assert s["psi_intersection_sizes"] == {"label_holder": N, "party0": N, "party1": N}
    assert s["final_train_loss"] is not None


def test_a_shrunken_intersection_is_a_warning(tmp_path, capsys, caplog):
    """A party whose IDs mostly differ in form (a prefix) from the others': a warning naming it, with
    sizes only, in the log and in summary.json; the run goes on with what matches."""
    frames = _frames()
    frames["party1"]["id"] = [i if k % 4 == 0 else i.upper() for k, i in enumerate(frames["party1"]["id"])]
    cfg = _write(tmp_path, frames)
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), *FAST]) == 0
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    kept = N // 4
    assert s["psi_intersection_size"] == kept
    assert s["psi_intersection_sizes"] == {"label_holder": N, "party0": N, "party1": kept}
    assert s["psi_set_sizes"] == {"label_holder": N, "party0": N, "party1": N}
    (w,) = s["psi_warnings"]
    assert w.startswith(f"PSI: party1 shares {kept} of the {N} IDs common so far") and "4242" not in w
    err = capsys.readouterr().err
    assert w in err and SECRET_ID not in err and "CUST" not in err


def test_a_class_whose_training_rows_no_party_shares(tmp_path, capsys):
    """Class 9 has training rows in labels.csv, but party0 lacks all of them: after PSI it is a
    test-only class, refused by the label holder in one line (sizes and the class only)."""
    frames = _frames()
    frames["labels"].loc[[0, 1, 2, 50], "y"] = 9
    frames["party0"] = frames["party0"].drop(index=[0, 1, 2])
    cfg = _write(tmp_path, frames)
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), *FAST]) == 2
    line = _line(capsys)
    assert "PSI: class '9' of " in line and "labels.csv appears only in test rows of the 57 common samples" in line
