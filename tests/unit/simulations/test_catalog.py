"""The listing commands' catalog (simulations/cli/catalog.json) is what the registries say, so
`vfl strategies/defenses/datasets/config-help` can answer without importing torch; config-help's
columns stay aligned with long keys, and its strategy row names the strategy asked about."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simulations.cli import catalog
from simulations.cli.main import help_columns, main
from simulations.data.registry import DATASETS, is_bundled, load_dataset
from vfl.core.errors import DataError

ROOT = Path(__file__).resolve().parents[3]


def test_the_shipped_catalog_is_the_registries() -> None:
    shipped = json.loads(catalog.CATALOG.read_text(encoding="utf-8"))
    assert shipped == catalog.build(builtin_only=True), "catalog.json is stale: regenerate it with `python -m simulations.cli.catalog`"


def test_listings_read_the_catalog(capsys, monkeypatch) -> None:
    monkeypatch.setattr(catalog, "third_party_plugins", lambda: [])
    monkeypatch.setattr(catalog, "build", lambda: pytest.fail("built live without a third-party plugin"))
    assert main(["strategies"]) == 0 and main(["defenses"]) == 0 and main(["datasets"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("sap ") and line.endswith("[shows: ep_eia, ep_aia]") for line in out)
    assert any(line.startswith("label_rr ") and line.endswith("[shows: epsilon_label]") for line in out)
    assert any(line.startswith("digits ") and line.endswith("[bundled]") for line in out)
    assert any(line.startswith("cifar10 ") and not line.endswith("[bundled]") for line in out)


def test_config_help_strategy_row_and_aligned_columns(capsys) -> None:
    assert main(["config-help", "--strategy", "pbm"]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(x for x in lines if x.startswith("strategy "))
    assert row.split()[1] == "'pbm'" and "unset: 'npq'" in row  # the default is npq; this table is pbm's
    assert any(x.startswith("params.beta ") for x in lines)
    col = lines[0].index("'run'")  # the default column
    keyed = [x for x in lines if not x.startswith(" ") and len(x.split()[0]) < col]
    assert len(keyed) > 100 and all(x[col - 1] == " " and x[col] != " " for x in keyed), "default column moved"
    assert "transport.resources.model_server.cpus" in "".join(keyed)  # the long keys fit the column
    assert main(["config-help", "--strategy", "nope"]) == 2
    assert "unknown strategy 'nope'" in capsys.readouterr().err


def test_help_columns_keep_long_cells_from_shifting_the_next_column() -> None:
    rows = [("a", "1", "int", "short"), ("k" * 60, "2", "int", "long key"), ("b", "3", "x" * 80, "long allowed")]
    lines = help_columns(rows).splitlines()
    assert lines[1] == "k" * 60 and lines[3] == "b" + " " * 28 + "3" + " " * 14 + "x" * 80, lines
    default, helps = lines[0].index("1"), lines[0].index("short")
    assert lines[2].index("2") == default and lines[2].index("long key") == helps  # the row goes on below
    assert lines[4].index("long allowed") == helps and len(lines) == 5


def test_help_texts_point_to_things_that_exist() -> None:
    from simulations.cli.main import _parser  # noqa: F401  (the CLI's own module is importable here)
    from vfl.config.fields import help_table
    from vfl.config.run_config import RunConfig

    texts = [h for *_, h in help_table(RunConfig)] + [r[3] for r in catalog.build()["defense_rows"]]
    assert not [t for t in texts if "README" in t], "help points into README (tables move): name a command or a doc"
    for doc in {d for t in texts for d in re.findall(r"docs/[\w./-]+\.md", t)}:
        assert (ROOT / doc).is_file(), doc
    assert "`vfl datasets`" in dict((k, h) for k, *_, h in help_table(RunConfig))["dataset"]


@pytest.mark.parametrize("name", ["digits", "wine", "breast-cancer", "tiny-pairs"])
def test_bundled_datasets_load_with_no_data_dir(name, monkeypatch) -> None:
    monkeypatch.delenv("VFL_DATA_DIR", raising=False)
    assert is_bundled(name) and load_dataset(name).num_classes >= 2


def test_the_others_need_files(monkeypatch) -> None:
    monkeypatch.delenv("VFL_DATA_DIR", raising=False)
    others = [n for n in DATASETS.names() if not is_bundled(n)]
    assert {"cifar10", "har", "sst2", "text-jsonl"} <= set(others)
    for name in others:
        with pytest.raises(DataError):
            load_dataset(name)
