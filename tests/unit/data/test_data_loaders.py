"""Real-format loaders read fixtures written in the public formats; missing data names files and source."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from simulations.data import DATASETS, load_dataset
from simulations.data import fixtures as fx
from simulations.data.modelnet import parse_view_file
from vfl.core.errors import ConfigError, DataError

REAL = ("har", "cifar10", "modelnet10", "phishing", "sst2", "text-csv", "imagefolder", "imagenet100")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fx.write_fixtures(tmp_path_factory.mktemp("vfl-data"), seed=0)


def test_every_real_format_is_registered():
    assert set(REAL) <= set(DATASETS.names())


def test_har(data_dir):
    d = load_dataset("har", data_dir=data_dir)
    assert d.x_train.shape == (fx.HAR_SIZES[0], 561) and d.x_test.shape == (fx.HAR_SIZES[1], 561)
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int64
    assert set(d.y_train) == set(range(6)) and d.num_classes == 6 and d.modality == "tabular"
    raw = np.loadtxt(data_dir / "UCI HAR Dataset" / "train" / "y_train.txt", dtype=np.int64)
    np.testing.assert_array_equal(d.y_train, raw - 1)  # labels 1..6 -> 0..5, order kept


def test_cifar10(data_dir):
    d = load_dataset("cifar10", data_dir=data_dir)
    assert d.x_train.shape == (5 * fx.CIFAR_PER_BATCH, 3, 32, 32) and d.x_test.shape == (fx.CIFAR_TEST, 3, 32, 32)
    assert d.x_train.dtype == np.float32 and 0.0 <= d.x_train.min() and d.x_train.max() <= 1.0
    assert d.num_classes == 10 and d.class_names[0] == "airplane" and d.modality == "image"
    assert set(d.y_train) <= set(range(10))


def test_modelnet10(data_dir):
    d = load_dataset("modelnet10", data_dir=data_dir)
    n_tr, n_te = (10 * k for k in fx.MODELNET_OBJECTS)
    assert d.x_train.shape == (n_tr, 12, 1, 32, 32) and d.x_test.shape == (n_te, 12, 1, 32, 32)
    assert d.modality == "multiview" and set(d.y_train) == set(range(10)) and d.x_train.dtype == np.float32
    rgb = load_dataset("modelnet10", data_dir=data_dir, size=8, channels=3, views=6)
    assert rgb.x_train.shape == (n_tr, 6, 3, 8, 8)
    with pytest.raises(ConfigError, match="views"):
        load_dataset("modelnet10", data_dir=data_dir, views=5)


def test_modelnet_file_names():
    assert parse_view_file("night_stand_0007.obj.shaded_v012.png") == ("night_stand_0007", 12)
    assert parse_view_file("chair_0001_003.jpg") == ("chair_0001", 3)  # modelnet40v1 naming
    assert parse_view_file("chair_0001.obj.depth_v003.png") is None
    assert parse_view_file("readme.txt") is None


def test_phishing_arff_and_csv(data_dir, tmp_path):
    d = load_dataset("phishing", data_dir=data_dir, seed=0)
    assert d.x_train.shape[1] == 30 and d.num_train + d.num_test == fx.PHISHING_ROWS
    assert d.num_test == round(0.2 * fx.PHISHING_ROWS) and d.metric == "auprc"
    assert set(np.unique(d.x_train)) <= {-1.0, 0.0, 1.0} and set(d.y_train) == {0, 1}
    only_csv = tmp_path / "phishing"
    only_csv.mkdir()
    shutil.copy(data_dir / "phishing" / "phishing.csv", only_csv)
    c = load_dataset("phishing", data_dir=tmp_path, seed=0)
    np.testing.assert_array_equal(c.x_train, d.x_train)  # same rows -> same seeded split
    np.testing.assert_array_equal(c.y_test, d.y_test)


def test_phishing_split_is_seeded_and_stratified(data_dir):
    a, b = (load_dataset("phishing", data_dir=data_dir, seed=3) for _ in range(2))
    np.testing.assert_array_equal(a.x_test, b.x_test)
    assert abs(a.y_test.mean() - a.y_train.mean()) < 0.1


def test_sst2_and_text_csv(data_dir):
    s = load_dataset("sst2", data_dir=data_dir)
    assert s.x_train.shape == (fx.SST2_SIZES[0],) and s.x_test.shape == (fx.SST2_SIZES[1],)
    assert s.x_train.dtype == object and isinstance(s.x_train[0], str) and s.modality == "text"
    assert set(s.y_train) == {0, 1} and not s.x_train[0].endswith(" ")
    t = load_dataset("text-csv", data_dir=data_dir)
    assert t.num_train + t.num_test == fx.TEXT_ROWS and t.class_names == ("neg", "pos")
    assert all('"quoted"' in x and "," in x for x in t.x_train)


def test_text_csv_with_test_file(data_dir, tmp_path):
    shutil.copy(data_dir / "text.csv", tmp_path / "text.csv")
    shutil.copy(data_dir / "text.csv", tmp_path / "text_test.csv")
    t = load_dataset("text-csv", data_dir=tmp_path)
    assert t.num_train == t.num_test == fx.TEXT_ROWS


def test_image_folders(data_dir):
    n_cls = len(fx.IMAGE_CLASSES)
    for name in ("imagenet100", "imagefolder"):
        d = load_dataset(name, data_dir=data_dir, size=16)
        assert d.x_train.shape == (n_cls * fx.IMAGES_PER_CLASS[0], 3, 16, 16)
        assert d.x_test.shape == (n_cls * fx.IMAGES_PER_CLASS[1], 3, 16, 16)
        assert d.class_names == fx.IMAGE_CLASSES and d.x_train.dtype == np.float32
    g = load_dataset("imagefolder", data_dir=data_dir / "imagefolder", size=8, channels=1, max_per_class=2)
    assert g.x_train.shape == (2 * n_cls, 1, 8, 8)


MISSING = {
    "har": ("UCI HAR Dataset/train/X_train.txt", "archive.ics.uci.edu/dataset/240"),
    "cifar10": ("cifar-10-batches-py/data_batch_1", "cs.toronto.edu/~kriz/cifar.html"),
    "modelnet10": ("shaded_v<001..012>.png", "modelnet.cs.princeton.edu"),
    "phishing": ("Training Dataset.arff", "openml.org/d/4534"),
    "sst2": ("SST-2/train.tsv", "gluebenchmark.com/tasks"),
    "text-csv": ("text.csv", "text,label"),
    "imagefolder": ("imagefolder/train/<class>", "image-net.org"),
    "imagenet100": ("imagenet100/train/<wnid>", "image-net.org"),
}


@pytest.mark.parametrize("name", sorted(MISSING))
def test_missing_data_names_files_and_source(name, tmp_path, monkeypatch):
    files, url = MISSING[name]
    with pytest.raises(DataError) as e:
        load_dataset(name, data_dir=tmp_path)
    assert files in str(e.value) and url in str(e.value) and str(tmp_path) in str(e.value)
    monkeypatch.delenv("VFL_DATA_DIR", raising=False)
    with pytest.raises(DataError, match="VFL_DATA_DIR"):
        load_dataset(name)


def test_data_dir_falls_back_to_env(data_dir, monkeypatch):
    monkeypatch.setenv("VFL_DATA_DIR", str(data_dir))
    assert load_dataset("har").num_train == fx.HAR_SIZES[0]


def test_malformed_files_raise_data_error(tmp_path):
    d = tmp_path / "UCI HAR Dataset"
    for split in ("train", "test"):
        (d / split).mkdir(parents=True)
        (d / split / f"X_{split}.txt").write_text(" 1.0 2.0\n")
        (d / split / f"y_{split}.txt").write_text("1\n")
    with pytest.raises(DataError, match="561"):
        load_dataset("har", data_dir=tmp_path)
    c = tmp_path / "cifar-10-batches-py"
    c.mkdir()
    for b in (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"):
        (c / b).write_bytes(b"\x80\x02}q\x00.")  # a pickled empty dict
    with pytest.raises(DataError, match="b'data'"):
        load_dataset("cifar10", data_dir=tmp_path)


def test_unknown_dataset_and_option(data_dir):
    with pytest.raises(ConfigError, match="allowed"):
        load_dataset("no-such-data")
    with pytest.raises(ConfigError, match="size"):
        load_dataset("har", data_dir=data_dir, size=3)


def test_fixtures_cli(tmp_path, capsys):
    assert fx.main([str(tmp_path / "out"), "--seed", "1"]) == 0
    assert (tmp_path / "out" / "cifar-10-batches-py" / "test_batch").is_file()
    assert "wrote" in capsys.readouterr().out
