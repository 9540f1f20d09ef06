"""Error messages never print a sample ID or a feature value (docs/usage.md): a party file without a
header row, a split column holding IDs, a mistyped id/label column. Before, the header (= the first
data row: an ID and feature values) or the bad split values (IDs) were printed."""

from __future__ import annotations

import csv

import pytest

from simulations.data.party_tables import PartyTableSource
from simulations.data.split_parties import ID, LABEL, SPLIT
from tests.support.party_data import write_blob_parties
from vfl.config.party_files import LabelFile, PartyFile
from vfl.core.errors import DataError


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def _write(path, rows):
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)


def _secrets(out):
    """Every ID and feature value in the files, as written."""
    cells = set()
    for p in out.glob("*.csv"):
        for row in _rows(p)[1:]:
            cells.update(c for c in row if c not in ("train", "test", "0", "1", "2"))
    return cells


@pytest.mark.parametrize("case, needle", [
    ("party_without_header", "does the file lack a header row?"),
    ("split_column_of_ids", "distinct values (not shown"),
    ("mistyped_label_column", "no label column 'Label'"),
    ("labels_without_header", "does the file lack a header row?"),
])
def test_no_sample_id_or_value_in_the_message(tmp_path, case, needle):
    write_blob_parties(tmp_path, num_parties=2, overlap=0.8)
    secrets = _secrets(tmp_path)
    parties = [PartyFile(path=str(tmp_path / f"party{i}.csv"), id=ID) for i in range(2)]
    labels = dict(path=str(tmp_path / "labels.csv"), id=ID, label=LABEL, split=SPLIT)
    if case == "party_without_header":
        _write(tmp_path / "party0.csv", _rows(tmp_path / "party0.csv")[1:])
    elif case == "split_column_of_ids":
        rows = _rows(tmp_path / "labels.csv")
        col = rows[0].index(SPLIT)
        for r in rows[1:]:
            r[col] = r[0]
        _write(tmp_path / "labels.csv", rows)
    elif case == "mistyped_label_column":
        labels["label"] = "Label"
    else:
        _write(tmp_path / "labels.csv", _rows(tmp_path / "labels.csv")[1:])
    with pytest.raises(DataError) as info:
        source = PartyTableSource.from_files(tuple(parties), LabelFile(**labels))
        source.party_table(0)
        source.label_table()
    msg = str(info.value)
    assert needle in msg and "\n" not in msg
    leaked = sorted(s for s in secrets if s in msg)
    assert not leaked, (msg, leaked[:3])
