"""Every bundled vertical-FL config runs one epoch end to end: offline twins on the packaged data,
paper settings on tiny fixtures written in the real public formats (so the real parsers run)."""

from __future__ import annotations

import pytest

from simulations.cli.runner import CONFIG_DIR, execute, read_config_file, resolve_config
from simulations.data.fixtures import write_fixtures

OFFLINE = ["demo", "demo-psi", "digits-5p", "digits-10p", "phishing-river-5p", "breast-cancer-10p", "mnist5k-quadrants",
           "mnist5k-quadrants-p128", "mnist5k-6strips", "mnist5k-12strips"]
PAPER = ["har-5p", "har-10p", "phishing-5p", "phishing-10p", "cifar10-quadrants", "imagenet100-quadrants",
         "modelnet10-6v", "modelnet10-12v"]
ONE_EPOCH = ["train.epochs=1", "transport.kind=inprocess"]
SMALL = ["data.train_subsample=512", "data.test_subsample=128"]  # every config's loader, split and model, at a test's size


def test_every_vertical_config_is_listed_here():
    vertical = {p.stem for p in CONFIG_DIR.glob("*.yaml") if read_config_file(p)["strategy"] in ("pbm", "npq", "ldp")}
    assert vertical == set(OFFLINE) | set(PAPER)


@pytest.mark.parametrize("name", OFFLINE)
def test_offline_config_runs_one_epoch(name, tmp_path):
    res = execute(resolve_config(name, ONE_EPOCH + SMALL), out_dir=tmp_path, progress=False)
    s = res.summary
    assert s["epochs"] == 1 and s["final_test_acc"] is not None and s["epsilon"] > 0
    assert s["payload_bytes_up"] <= 1.05 * s["information_bound_bytes_up"]


@pytest.fixture(scope="module")
def fixtures_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("fx")
    write_fixtures(out)
    return out


@pytest.mark.parametrize("name", PAPER)
def test_paper_config_runs_one_epoch_on_real_format_fixtures(name, fixtures_dir, tmp_path):
    extra = [f"data.data_dir={fixtures_dir}", "model.embed_dim=8"]  # tiny P: the fixtures are tiny
    res = execute(resolve_config(name, ONE_EPOCH + extra), out_dir=tmp_path, progress=False)
    assert res.summary["epochs"] == 1 and res.summary["dataset"] == read_config_file(name)["dataset"]
