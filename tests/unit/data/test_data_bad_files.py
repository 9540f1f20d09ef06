"""Damaged or hostile data files: one DataError naming the file (never a traceback, never code run)."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from simulations.cli.main import main
from simulations.data import fixtures as fx
from simulations.data import load_dataset
from vfl.core.errors import DataError


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fx.write_fixtures(tmp_path_factory.mktemp("vfl-data"), seed=0)


@pytest.fixture
def data_dir(pristine, tmp_path) -> Path:
    out = tmp_path / "data"
    for sub in ("cifar-10-batches-py", "UCI HAR Dataset", "phishing"):
        shutil.copytree(pristine / sub, out / sub)
    return out


def _fails(name: str, data_dir: Path, file: Path, needle: str, **opts) -> None:
    with pytest.raises(DataError) as exc:
        load_dataset(name, data_dir=data_dir, **opts)
    msg = str(exc.value)
    assert str(file) in msg and needle in msg, msg
    assert "\n" not in msg


# ---- CIFAR-10 (pickles: restricted unpickler) --------------------------------------------------
def test_cifar_truncated_batch(data_dir):
    f = data_dir / "cifar-10-batches-py" / "data_batch_3"
    f.write_bytes(f.read_bytes()[:5000])
    _fails("cifar10", data_dir, f, "not a readable CIFAR-10 batch")


def test_cifar_garbage_batch(data_dir):
    f = data_dir / "cifar-10-batches-py" / "test_batch"
    f.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    _fails("cifar10", data_dir, f, "not a readable CIFAR-10 batch")


class _Evil:
    def __reduce__(self):  # what a crafted pickle would do when loaded with pickle.load
        return (os.mkdir, (str(self.marker),))

    def __init__(self, marker: Path) -> None:
        self.marker = marker


def test_cifar_pickle_cannot_run_code(data_dir, tmp_path):
    marker = tmp_path / "pwned"
    f = data_dir / "cifar-10-batches-py" / "data_batch_1"
    f.write_bytes(pickle.dumps({b"data": _Evil(marker), b"labels": [0]}, protocol=2))
    _fails("cifar10", data_dir, f, "refuses global posix.mkdir")
    assert not marker.exists()
    pickle.loads(f.read_bytes())  # the same bytes with an unrestricted unpickler DO run code
    assert marker.exists()


def test_cifar_wrong_content(data_dir):
    f = data_dir / "cifar-10-batches-py" / "data_batch_2"
    f.write_bytes(pickle.dumps({b"data": np.zeros((4, 3072), np.float64), b"labels": [0, 1, 2, 3]}, protocol=2))
    _fails("cifar10", data_dir, f, "must be a uint8 array")
    f.write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}, protocol=2))
    _fails("cifar10", data_dir, f, "allowed 0..9")


# ---- UCI HAR (text) ----------------------------------------------------------------------------
def _har_x(data_dir: Path) -> Path:
    return data_dir / "UCI HAR Dataset" / "train" / "X_train.txt"


@pytest.mark.parametrize("mutate,needle", [
    (lambda rows: rows[:2] + [rows[2].replace(rows[2].split()[5], "abc", 1)] + rows[3:], "could not convert string 'abc'"),
    (lambda rows: rows[:3] + [" ".join(rows[3].split()[:-1])] + rows[4:], "number of columns changed"),
    (lambda rows: rows[:1] + [rows[1].replace(rows[1].split()[0], "nan", 1)] + rows[2:], "row 2 holds a NaN"),
    (lambda rows: [], "holds no rows"),
])
def test_har_bad_rows(data_dir, mutate, needle):
    f = _har_x(data_dir)
    rows = f.read_text().splitlines()
    f.write_text("\n".join(mutate(rows)) + "\n")
    _fails("har", data_dir, f, needle)


# ---- phishing (CSV / ARFF) ---------------------------------------------------------------------
def _only(data_dir: Path, keep: str) -> Path:
    for p in (data_dir / "phishing").iterdir():
        if p.name != keep:
            p.unlink()
    return data_dir / "phishing" / keep


@pytest.mark.parametrize("text,needle", [
    ("", "is empty"),
    ("having_IP_Address,Result\n", "has a header but no data rows"),
    ("a,Result\n1,1\n1\n", "row 2 has 1 values"),
])
def test_phishing_csv_bad(data_dir, text, needle):
    f = _only(data_dir, "phishing.csv")
    f.write_text(text)
    _fails("phishing", data_dir, f, needle)


def test_phishing_arff_value_outside_its_declared_domain(data_dir):
    f = _only(data_dir, "Training Dataset.arff")
    lines = f.read_text().splitlines()
    i = lines.index("@data") + 3
    lines[i] = "7" + lines[i][lines[i].index(","):]
    f.write_text("\n".join(lines) + "\n")
    _fails("phishing", data_dir, f, f"line {i + 1}: having_IP_Address = '7'; allowed: {{-1,0,1}}")


def test_cli_names_the_file_in_one_line(data_dir, tmp_path, capsys):
    f = data_dir / "cifar-10-batches-py" / "data_batch_1"
    f.write_bytes(b"\x80\x02garbage")
    code = main(["run", "cifar10-quadrants", "--transport", "inprocess", "--no-progress", "--out",
                 str(tmp_path / "r"), "--set", f"data.data_dir={data_dir}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and str(f) in err, err
    assert not (tmp_path / "r").exists()
