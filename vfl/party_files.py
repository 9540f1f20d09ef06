"""Config of per-party data files (``data.parties``, ``data.labels``, ``data.split_parties``).

Real vertical FL starts from one table per party keyed by a sample ID; the rows are aligned by
private set intersection in the setup phase. These sections say where each party's table is.
Relative paths are resolved against ``data.data_dir`` (else ``$VFL_DATA_DIR``, else the working
directory); ``.csv`` and ``.parquet`` files are read.
"""

from __future__ import annotations

from dataclasses import dataclass

from vfl.config import param


@dataclass(frozen=True)
class PartyFile:
    """One passive party's own table: an ID column and its feature columns."""

    path: str = param(help="the party's table (.csv or .parquet)")
    id: str = param(help="column holding the sample ID (customer number, e-mail hash...)")
    columns: tuple[str, ...] = param((), help="numeric feature columns (default: every column but the id)")
    standardize: bool = param(False, help="z-score the features with the aligned training rows' statistics")


@dataclass(frozen=True)
class LabelFile:
    """The label holder's (server's) table: an ID column, the label column, optionally the split."""

    path: str = param(help="the label holder's table (.csv or .parquet)")
    id: str = param(help="column holding the sample ID")
    label: str = param(help="column holding the class label (integers or names)")
    split: str | None = param(None, help="column with 'train'/'test' per row (else a seeded stratified "
                                         "split of the aligned intersection)")
    test_fraction: float = param(0.25, gt=0, lt=1, help="test share of the intersection when split is not given")


@dataclass(frozen=True)
class SplitParties:
    """Generate per-party files from the packaged ``dataset`` on first use (offline demos)."""

    overlap: float = param(0.8, gt=0, le=1, help="share of the samples every party (and the label holder) holds")
    dir: str | None = param(None, help="where to write them (default: $VFL_CACHE_DIR or ~/.cache/vfl)")
