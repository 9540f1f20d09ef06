"""The tree benchmarks' tables (default-credit, give-me-some-credit, bank-marketing, a9a) read from
files written in their real formats: shapes, labels, NaN kept, category codes, splits and one-line errors."""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from simulations.data import load_dataset
from simulations.data import tabular_fixtures as tf
from simulations.data.bank import CATEGORIES, COLUMNS
from simulations.data.credit import CREDIT_FEATURES, GMSC_FEATURES
from simulations.data.registry import is_bundled
from tests.support.xls import write_xls
from vfl.core.errors import DataError

NEW = ("default-credit", "give-me-some-credit", "bank-marketing", "a9a")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tree-tables")
    tf.write_tabular(out, np.random.default_rng(0))
    return out


@pytest.fixture
def data_dir(pristine: Path, tmp_path: Path) -> Path:
    """A copy each test may damage."""
    return Path(shutil.copytree(pristine, tmp_path / "data"))


def _fails(name: str, data_dir: Path, needle: str, **opts) -> str:
    with pytest.raises(DataError) as exc:
        load_dataset(name, data_dir=data_dir, **opts)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg, msg
    return msg


def _rows(path: Path, delimiter: str = ",") -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f, delimiter=delimiter))


def _write(path: Path, rows: list[list[str]], delimiter: str = ",") -> None:
    with open(path, "w", newline="") as f:
        csv.writer(f, delimiter=delimiter).writerows(rows)


def _as_set(x: np.ndarray) -> set[tuple[float, ...]]:
    return {tuple(r) for r in x.tolist()}


# ---- default-credit --------------------------------------------------------------------------------
def test_default_credit_kaggle_csv(pristine):
    d = load_dataset("default-credit", data_dir=pristine, standardize=False)
    assert d.x_train.shape == (90, 23) and d.x_test.shape == (30, 23)  # stratified 75/25 of 120 rows
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int64 and (d.num_classes, d.metric) == (2, "auprc")
    rows = _rows(pristine / "default-credit" / "UCI_Credit_Card.csv")
    assert rows[0][1:-1] == list(CREDIT_FEATURES)
    raw = np.asarray([[float(v) for v in r[1:-1]] for r in rows[1:]], dtype=np.float32)  # the ID column is dropped
    assert _as_set(np.concatenate([d.x_train, d.x_test])) == _as_set(raw)
    assert sorted(np.concatenate([d.y_train, d.y_test]).tolist()) == sorted(int(r[-1]) for r in rows[1:])
    z = load_dataset("default-credit", data_dir=pristine)  # default: z-scored with the train statistics
    assert np.allclose(z.x_train.mean(0), 0, atol=1e-5) and np.array_equal(z.y_test, d.y_test)


def test_default_credit_csv_export_of_the_xls_reads_the_same(pristine):
    kaggle = load_dataset("default-credit", data_dir=pristine, seed=3)
    export = load_dataset("default-credit", data_dir=pristine, seed=3, file="default of credit card clients.csv")
    assert np.array_equal(kaggle.x_train, export.x_train) and np.array_equal(kaggle.y_test, export.y_test)


def test_default_credit_xls(pristine, tmp_path):
    pytest.importorskip("xlrd")
    rows = _rows(pristine / "default-credit" / "default of credit card clients.csv")
    cells = rows[:2] + [[float(v) for v in r] for r in rows[2:]]  # numbers as Excel's float cells
    write_xls(tmp_path / "default of credit card clients.xls", cells)
    got = load_dataset("default-credit", data_dir=tmp_path, seed=1)  # the .xls name is found first
    want = load_dataset("default-credit", data_dir=pristine, seed=1)
    assert np.array_equal(got.x_train, want.x_train) and np.array_equal(got.y_train, want.y_train)
    (tmp_path / "default of credit card clients.xls").write_bytes(b"not a workbook at all")
    _fails("default-credit", tmp_path, "as an Excel .xls sheet")


def test_default_credit_xls_without_xlrd_names_the_extra(tmp_path, monkeypatch):
    write_xls(tmp_path / "default of credit card clients.xls", [["ID"]])
    monkeypatch.setitem(sys.modules, "xlrd", None)  # import xlrd -> ImportError
    msg = _fails("default-credit", tmp_path, "pip install -e '.[xls]'")
    assert "xlrd" in msg and "save the sheet as CSV" in msg


def test_default_credit_bad_files(data_dir):
    f = data_dir / "default-credit" / "UCI_Credit_Card.csv"
    rows = _rows(f)
    _write(f, [rows[0][:5] + ["LIMITBAL"] + rows[0][6:]] + rows[1:])
    _fails("default-credit", data_dir, "header column 6 is 'LIMITBAL', expected 'AGE'")
    _write(f, rows[:3] + [rows[3][:-1]] + rows[4:])
    _fails("default-credit", data_dir, "line 4 has 24 values, the header has 25")
    _write(f, rows[:5] + [rows[5][:2] + ["n/a"] + rows[5][3:]] + rows[6:])
    _fails("default-credit", data_dir, "line 6 column 'SEX' holds 'n/a'; allowed: a finite number")
    _write(f, rows[:2] + [rows[2][:-1] + ["2"]] + rows[3:])
    _fails("default-credit", data_dir, "line 3 label 'default.payment.next.month' is 2; allowed: 0, 1")
    _write(f, [rows[0]] + [r[:-1] + ["0"] for r in rows[1:]])
    _fails("default-credit", data_dir, "holds class 'default' 0 time(s)")


# ---- give-me-some-credit ---------------------------------------------------------------------------
def test_give_me_some_credit_keeps_missing_values(pristine):
    d = load_dataset("give-me-some-credit", data_dir=pristine, standardize=False)
    assert d.x_train.shape == (120, 10) and d.x_test.shape == (40, 10) and d.metric == "auprc"
    x = np.concatenate([d.x_train, d.x_test])
    income, deps = GMSC_FEATURES.index("MonthlyIncome"), GMSC_FEATURES.index("NumberOfDependents")
    n = tf.GMSC_ROWS
    assert np.isnan(x[:, income]).sum() == n // 5 and np.isnan(x[:, deps]).sum() == n // 16
    assert np.isnan(np.delete(x, [income, deps], axis=1)).sum() == 0
    assert d.num_missing == n // 5 + n // 16
    z = load_dataset("give-me-some-credit", data_dir=pristine)  # z-scored: NaN stays, the rest is scaled
    assert np.array_equal(np.isnan(z.x_train), np.isnan(d.x_train))
    assert abs(float(np.nanmean(z.x_train[:, income]))) < 1e-5


def test_give_me_some_credit_bad_files(data_dir):
    f = data_dir / "give-me-some-credit" / "cs-training.csv"
    rows = _rows(f)
    _write(f, [rows[0][:1] + ["target"] + rows[0][2:]] + rows[1:])
    _fails("give-me-some-credit", data_dir, "header column 2 is 'target', expected 'SeriousDlqin2yrs'")
    _write(f, rows[:2] + [rows[2][:3] + ["abc"] + rows[2][4:]] + rows[3:])
    _fails("give-me-some-credit", data_dir, "line 3 column 'age' holds 'abc'; allowed: a finite number or '' / 'NA'")
    _write(f, rows[:2] + [rows[2] + ["7"]] + rows[3:])
    _fails("give-me-some-credit", data_dir, "line 3 has 13 values, the header has 12")
    _write(f, [rows[0]] + [r[:1] + ["1"] + r[2:] for r in rows[1:]])
    _fails("give-me-some-credit", data_dir, "holds class 'no-delinquency' 0 time(s)")


# ---- bank-marketing --------------------------------------------------------------------------------
def test_bank_marketing_codes_categories_by_sorted_name(pristine):
    d = load_dataset("bank-marketing", data_dir=pristine, standardize=False)
    assert d.x_train.shape == (90, 16) and d.x_test.shape == (30, 16) and d.class_names == ("no", "yes")
    rows = _rows(pristine / "bank-marketing" / "bank-full.csv", ";")
    assert rows[0] == [*COLUMNS, "y"]
    codes = {c: {v: i for i, v in enumerate(sorted(CATEGORIES[c]))} for c in CATEGORIES}
    want = np.asarray([[codes[c][v] if c in codes else float(v) for c, v in zip(COLUMNS, r[:-1], strict=True)]
                       for r in rows[1:]], dtype=np.float32)
    assert _as_set(np.concatenate([d.x_train, d.x_test])) == _as_set(want)
    month, job = COLUMNS.index("month"), COLUMNS.index("job")
    assert codes["month"]["apr"] == 0 and codes["month"]["sep"] == 11 and codes["job"]["unknown"] == 11
    assert not np.isnan(d.x_train).any() and d.num_missing == 0  # 'unknown' is a category, not missing
    assert {int(v) for v in np.concatenate([d.x_train, d.x_test])[:, month]} <= set(range(12))
    assert int(np.concatenate([d.x_train, d.x_test])[:, job].max()) == 11  # 'unknown' appears and is coded
    sample = load_dataset("bank-marketing", data_dir=pristine, file="bank.csv")
    assert sample.num_train + sample.num_test == tf.BANK_SAMPLE_ROWS and sample.x_train.shape[1] == 16


def test_bank_marketing_bad_files(data_dir):
    f = data_dir / "bank-marketing" / "bank-full.csv"
    rows = _rows(f, ";")
    _write(f, rows)  # a comma-separated copy: one header cell holding everything
    _fails("bank-marketing", data_dir, "header column 1 is 'age,job,marital,")
    _write(f, rows[:2] + [rows[2][:1] + ["astronaut"] + rows[2][2:]] + rows[3:], ";")
    _fails("bank-marketing", data_dir, "line 3 column 'job' holds 'astronaut'; allowed: admin., blue-collar")
    _write(f, rows[:2] + [rows[2][:5] + ["lots"] + rows[2][6:]] + rows[3:], ";")
    _fails("bank-marketing", data_dir, "line 3 column 'balance' holds 'lots'")
    _write(f, rows[:2] + [rows[2][:-2]] + rows[3:], ";")
    _fails("bank-marketing", data_dir, "line 3 has 15 values, the header has 17")
    _write(f, [rows[0]] + [r[:-1] + ["yes"] for r in rows[1:]], ";")
    _fails("bank-marketing", data_dir, "holds class 'no' 0 time(s)")


# ---- a9a -------------------------------------------------------------------------------------------
def test_a9a_libsvm_files_dense_with_their_split(pristine):
    d = load_dataset("a9a", data_dir=pristine)
    assert d.x_train.shape == (tf.A9A_SIZES[0], 123) and d.x_test.shape == (tf.A9A_SIZES[1], 123)
    assert set(np.unique(d.x_train)) == {0.0, 1.0} and d.num_missing == 0  # unlisted = 0, not missing
    assert (d.x_train.sum(1) == tf.A9A_ACTIVE).all() and d.x_train[:, 122].any() and not d.x_test[:, 122].any()
    lines = (pristine / "a9a" / "a9a").read_text().splitlines()
    assert d.y_train.tolist() == [int(ln.split()[0] == "+1") for ln in lines]  # -1/+1 -> 0/1, file order
    first = [int(t.split(":")[0]) - 1 for t in lines[0].split()[1:]]
    assert np.flatnonzero(d.x_train[0]).tolist() == first  # 1-based indices
    assert load_dataset("a9a", data_dir=pristine, standardize=True).x_train.dtype == np.float32


def test_a9a_bad_files(data_dir):
    f = data_dir / "a9a" / "a9a"
    lines = f.read_text().splitlines()
    for bad, needle in ((["0.5 3:1"], "starts with '0.5'; allowed labels: -1, +1"),
                        (["+1 0:1"], "line 1 holds '0:1'; allowed: index:value"),
                        (["+1 124:1"], "index 124; allowed: 1..123"),
                        (["+1 5:1 3:1"], "index 3 after 5"),
                        (["-1 3:x"], "holds '3:x'")):
        f.write_text("\n".join(bad + lines[1:]) + "\n")
        assert f"{f} line 1" in _fails("a9a", data_dir, needle)
    f.write_text("\n".join("-1" + ln[2:] if ln.startswith("+1") else ln for ln in lines) + "\n")
    _fails("a9a", data_dir, "holds class '<=50K' only")


# ---- all four ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "files"), [("default-credit", ("UCI_Credit_Card.csv", "default of credit card clients.xls")),
                                             ("give-me-some-credit", ("cs-training.csv",)),
                                             ("bank-marketing", ("bank-full.csv",)), ("a9a", ("a9a", "a9a.t"))])
def test_a_missing_file_is_one_line_naming_the_files(name, files, tmp_path, monkeypatch):
    msg = _fails(name, tmp_path, "never downloads")
    assert all(f"'{f}'" in msg for f in files) and str(tmp_path) in msg
    assert not is_bundled(name)
    monkeypatch.delenv("VFL_DATA_DIR", raising=False)
    _fails(name, None, "set data.data_dir")  # no directory at all: names the key that sets it
