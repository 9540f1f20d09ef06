"""Per-party data sources: each party's own table (CSV or Parquet) keyed by a sample ID.

``PartyTableSource`` is what every host gets; a host calls ``party_table(k)`` for the party nodes
it runs and ``label_table()`` for the server, so it opens only its own parties' files (the driver
opens none: it learns the aligned sizes from the PSI messages). Every file goes through
``read_table`` and is validated with one ``DataError`` naming the file, the column and the key:
missing file, missing id/label/feature column, a column named twice in the header, empty or
duplicate IDs (after ``canonical_id``, the form PSI matches), non-numeric, missing or non-finite
feature values, labels that are not integers or names or lie outside ``classes``, a class present
only in test rows, split values other than train/test. No message holds a sample ID or a feature
value: they name the file, the column, the row (0-based data row) and what is allowed.

``data.labels.task: regression``: the label column is a numeric target (finite, float32; metric rmse).
A missing feature cell (empty, ``NA``, NaN) is refused unless the strategy reading the table handles
missing values (``party_table(k, allow_missing=True)``), which then gets it as NaN.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from simulations.data.common import labels_to_ids, resolve_data_dir
from vfl.config.party_files import LabelFile, PartyFile, canonical_id, normalised
from vfl.core.errors import ConfigError, DataError, install_hint
from vfl.core.logs import get_logger
from vfl.data.dataset import Dataset, KeyedLabels, KeyedTable, LabelShard, PartyShard

SPLIT_VALUES = ("train", "test")


def read_table(path: str, *, key: str, id_column: str) -> Any:
    """One party file as a pandas DataFrame (the ID column as strings); the only place files are opened."""
    import pandas as pd

    p = Path(path)
    if p.is_dir():
        raise DataError(f"{path}: is a directory; give the party's table file ({key}.path: .csv or .parquet)")
    if not p.is_file():
        raise DataError(f"{path}: file not found ({key}.path)")
    suffix = p.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pd.read_csv(p, dtype={id_column: str}, keep_default_na=True)
        elif suffix in (".parquet", ".pq"):
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise DataError(f"{path}: reading Parquet needs pyarrow: {install_hint('parquet')} "
                                f"(or convert the file to CSV)") from None
            frame = pd.read_parquet(p)
        else:
            raise DataError(f"{path}: unsupported file type {suffix or '(none)'!r} ({key}.path); allowed: .csv, .parquet")
    except DataError:
        raise
    except Exception as exc:  # pandas/pyarrow parse errors (a ragged row: "Expected 3 fields in line 5, saw 4")
        raise DataError(f"{path}: cannot read ({type(exc).__name__}: {' '.join(str(exc).split())})") from None
    if len(frame) == 0:
        raise DataError(f"{path}: the table has no rows")
    _check_header(p, suffix, path)
    return frame


def _check_header(p: Path, suffix: str, path: str) -> None:
    """A column named twice (pandas would silently rename the second ``x.1``)."""
    if suffix == ".csv":
        import csv

        with p.open(newline="") as fh:
            names = [n.strip() for n in next(csv.reader(fh), [])]
    else:
        import pyarrow.parquet as pq

        names = list(pq.read_schema(p).names)
    for i, n in enumerate(names):
        if n in names[:i]:
            raise DataError(f"{path}: column {n!r} appears twice in the header (columns {names.index(n)} and "
                            f"{i}); allowed: each column once")


def _missing_column_hint(columns: Any, wanted: str) -> str:
    """What to say about a header lacking ``wanted``, without echoing a data row: a header with a
    number in it is a data row (no header line), so only its size is named; otherwise only the
    names close to ``wanted`` (a typo), never the others."""
    names = [str(c) for c in columns]

    def numeric(v: str) -> bool:
        try:
            float(v)
        except ValueError:
            return False
        return True

    if any(numeric(n) for n in names):
        return f"the first line of its {len(names)} columns holds numbers: does the file lack a header row?"
    close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.6)
    return f"{len(names)} columns" + (f"; close: {close}" if close else "")


def _shown(values: list[str]) -> str:
    """Bad cell values worth echoing (short words like 'Train' or 'val'), else only their count: an ID
    or a feature value never goes into a message."""
    words = [v for v in values if v.isalpha() and len(v) <= 10]
    return repr(words[:3]) if len(words) == len(values) else f"{len(values)} distinct values (not shown: IDs or data)"


def _ids(frame: Any, path: str, column: str, key: str) -> np.ndarray:
    if column not in frame.columns:
        raise DataError(f"{path}: no id column {column!r} ({key}.id); {_missing_column_hint(frame.columns, column)}")
    col = frame[column]
    if col.isna().any():
        raise DataError(f"{path}: id column {column!r} is empty in row {int(np.flatnonzero(col.isna())[0])}")
    ids = np.asarray([canonical_id(v) for v in col], dtype=object)  # what PSI matches
    changed = sum(normalised(v) for v in col)
    if changed:  # said, with a count (never the IDs): another party's export may not have needed it
        get_logger(__name__).warning("%s: %d of %d ID(s) in column %r normalised before matching (Unicode NFC, "
                                     "invisible characters such as zero-width spaces removed)", path, changed,
                                     len(col), column)
    if any(not i for i in ids):
        raise DataError(f"{path}: id column {column!r} is blank in row {[bool(i) for i in ids].index(False)}")
    dup = np.flatnonzero(pd_duplicated(ids))
    if len(dup):  # rows, not the IDs themselves: an error message may travel to the operator
        raise DataError(f"{path}: duplicate IDs in column {column!r} (rows {', '.join(map(str, dup[:4]))}); "
                        "allowed: each ID once, where surrounding spaces and an all-digit ID's leading zeros "
                        "do not count ('007' and '7' are one ID)")
    return ids


def pd_duplicated(ids: np.ndarray) -> np.ndarray:
    """Mask of the rows whose (canonical) ID occurs more than once."""
    import pandas as pd

    return pd.Series(ids).duplicated(keep=False).to_numpy()


def read_party_table(spec: PartyFile, *, key: str, allow_missing: bool = False) -> KeyedTable:
    """A passive party's table: unique IDs and float32 features of the chosen numeric columns; an empty
    or NaN cell is refused, or kept as NaN with ``allow_missing`` (a strategy that handles missing values)."""
    import pandas as pd
    frame = read_table(spec.path, key=key, id_column=spec.id)
    ids = _ids(frame, spec.path, spec.id, key)
    cols = list(spec.columns) or [str(c) for c in frame.columns if str(c) != spec.id]
    if not cols:
        raise DataError(f"{spec.path}: no feature column besides the id column {spec.id!r}")
    for c in cols:
        if c not in frame.columns:
            raise DataError(f"{spec.path}: no column {c!r} ({key}.columns)")
        if c == spec.id:
            raise DataError(f"{spec.path}: the id column {c!r} cannot be a feature ({key}.columns)")
        values = frame[c]
        if not pd.api.types.is_numeric_dtype(values):
            raise DataError(f"{spec.path}: column {c!r} is not numeric (dtype {values.dtype}); encode it or "
                            f"leave it out of {key}.columns")
        if values.isna().any() and not allow_missing:
            raise DataError(f"{spec.path}: column {c!r} has missing values (row {int(np.flatnonzero(values.isna())[0])}, "
                            "empty or NaN); allowed: finite numbers (impute them, or use a strategy that handles "
                            "missing values)")
    with np.errstate(over="ignore"):
        x = frame[cols].to_numpy(dtype=np.float32, na_value=np.nan)
    bad = ~np.isfinite(x) & ~np.isnan(x) if allow_missing else ~np.isfinite(x)
    if bad.any():  # inf/-inf in the file, or a value beyond float32's range
        row, col = (int(v[0]) for v in np.nonzero(bad))
        raise DataError(f"{spec.path}: column {cols[col]!r} holds a non-finite value in row {row} (inf, or beyond "
                        f"float32's +-3.4e38); allowed: finite numbers")
    return KeyedTable(source=spec.path, ids=ids, x=x, columns=tuple(cols), standardize=spec.standardize)


def read_label_table(spec: LabelFile, *, key: str = "data.labels") -> KeyedLabels:
    """The label holder's table: unique IDs, class ids and the optional train/test split column."""
    frame = read_table(spec.path, key=key, id_column=spec.id)
    ids = _ids(frame, spec.path, spec.id, key)
    if spec.label not in frame.columns:
        raise DataError(f"{spec.path}: no label column {spec.label!r} ({key}.label); "
                        f"{_missing_column_hint(frame.columns, spec.label)}")
    raw = frame[spec.label]
    if raw.isna().any():
        raise DataError(f"{spec.path}: label column {spec.label!r} is empty in row {int(np.flatnonzero(raw.isna())[0])}")
    regression = spec.task == "regression"
    y, names = _targets(raw, spec, key) if regression else _class_ids(raw.to_numpy(), spec, key)
    if len(names) < 2 and not regression:
        raise DataError(f"{spec.path}: label column {spec.label!r} holds a single class")
    is_test = None
    if spec.split is not None:
        if spec.split not in frame.columns:
            raise DataError(f"{spec.path}: no split column {spec.split!r} ({key}.split); "
                            f"{_missing_column_hint(frame.columns, spec.split)}")
        empty = frame[spec.split].isna().to_numpy() | (frame[spec.split].astype(str).str.strip() == "").to_numpy()
        if empty.any():
            raise DataError(f"{spec.path}: split column {spec.split!r} is empty in row {int(np.flatnonzero(empty)[0])}; "
                            "allowed: train, test")
        split = frame[spec.split].astype(str).str.strip().str.lower()
        bad = sorted(set(split) - set(SPLIT_VALUES))
        if bad:
            raise DataError(f"{spec.path}: split column {spec.split!r} holds {_shown(bad)}; allowed: train, test")
        is_test = (split == "test").to_numpy()
        only_test = [] if regression else sorted(set(y[is_test].tolist()) - set(y[~is_test].tolist()))
        if only_test:  # the head could never learn it: every test row of it is an error by construction
            raise DataError(f"{spec.path}: class {names[only_test[0]]!r} of label column {spec.label!r} appears "
                            f"only in test rows (split column {spec.split!r}); allowed: every class in train rows")
    return KeyedLabels(source=spec.path, ids=ids, y=y, num_classes=1 if regression else len(names), is_test=is_test,
                       test_fraction=spec.test_fraction, class_names=names, metric="rmse" if regression else "accuracy")


def _targets(raw: Any, spec: LabelFile, key: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """A regression target column (``task: regression``): finite numbers, as float32."""
    import pandas as pd

    if not pd.api.types.is_numeric_dtype(raw) or pd.api.types.is_bool_dtype(raw):
        raise DataError(f"{spec.path}: label column {spec.label!r} is not numeric (dtype {raw.dtype}); "
                        f"{key}.task: regression needs a numeric target")
    with np.errstate(over="ignore"):
        y = raw.to_numpy(dtype=np.float32)
    bad = ~np.isfinite(y)
    if bad.any():
        raise DataError(f"{spec.path}: label column {spec.label!r} holds a non-finite value in row "
                        f"{int(np.flatnonzero(bad)[0])} (inf, or beyond float32's +-3.4e38); allowed: finite numbers")
    return y, ()


def _class_ids(raw: np.ndarray, spec: LabelFile, key: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Class ids of a label column: integers or names (a float column only with integral values),
    and, when ``classes`` is given, only those values (in that order)."""
    import pandas as pd

    values = pd.Series(raw)
    if pd.api.types.is_float_dtype(values):
        with np.errstate(invalid="ignore"):
            frac = ~np.isfinite(raw.astype(np.float64)) | (np.mod(raw.astype(np.float64), 1) != 0)
        if frac.any():
            raise DataError(f"{spec.path}: label column {spec.label!r} holds a non-integer number in row "
                            f"{int(np.flatnonzero(frac)[0])}; allowed: integer class ids or class names")
        raw = raw.astype(np.int64)
    if not spec.classes:
        return labels_to_ids(raw)
    names = tuple(str(c) for c in spec.classes)
    index = {n: i for i, n in enumerate(names)}
    text = [str(v).strip() for v in raw]
    outside = [i for i, t in enumerate(text) if t not in index]
    if outside:
        allowed = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        raise DataError(f"{spec.path}: label column {spec.label!r} holds a value outside {key}.classes in row "
                        f"{outside[0]}; allowed: {allowed}")
    return np.asarray([index[t] for t in text], dtype=np.int64), names


@dataclass(frozen=True)
class PartyTableSource:
    """The run's per-party files (absolute paths); each host reads only the ones it needs."""

    num_parties: int
    parties: tuple[PartyFile, ...]
    labels: LabelFile

    @classmethod
    def from_files(cls, parties: tuple[PartyFile, ...], labels: LabelFile, *,
                   data_dir: str | None = None) -> PartyTableSource:
        """Resolve relative paths against ``data_dir`` (else ``$VFL_DATA_DIR``, else the working dir)."""
        base = resolve_data_dir(data_dir) or Path.cwd()

        def absolute(path: str) -> str:
            p = Path(path).expanduser()
            return str(p if p.is_absolute() else (base / p).absolute())

        out = cls(len(parties), tuple(replace(p, path=absolute(p.path)) for p in parties),
                  replace(labels, path=absolute(labels.path)))
        for i, p in enumerate(out.parties):  # a label holder's one table: its labels and its own columns
            if p.path == out.labels.path and (not p.columns or out.labels.label in p.columns):
                raise ConfigError(f"data.parties[{i}].columns", f"{p.path} is also the label file: list its "
                                  f"feature columns, without the label {out.labels.label!r}")
        return out

    @property
    def is_regression(self) -> bool:
        return self.labels.task == "regression"

    def party_table(self, index: int, *, allow_missing: bool = False) -> KeyedTable:
        return read_party_table(self.parties[index], key=f"data.parties[{index}]", allow_missing=allow_missing)

    def label_table(self) -> KeyedLabels:
        return read_label_table(self.labels)

    def dataset(self) -> Dataset:
        raise DataError("per-party files are never loaded as one dataset; their rows are aligned by PSI "
                        "in the setup phase (use a strategy that reads party files: `vfl strategies`)")

    def partition(self) -> tuple[list[PartyShard], LabelShard]:
        return self.dataset()  # type: ignore[return-value]

    def aligned(self, train_ids: list[str], test_ids: list[str], *, name: str) -> AlignedTables:
        """Every file joined in a run's aligned order (the split its checkpoint keeps): the experimenter's
        ground truth that scores ``vfl report``'s attacks. No node ever holds it."""
        table_of_labels = self.label_table()
        labels = table_of_labels.shard(train_ids, test_ids)
        shards = []
        for k in range(self.num_parties):
            table = self.party_table(k, allow_missing=True)
            x_tr, x_te = table.rows(train_ids, test_ids)
            shards.append(PartyShard(k, x_tr, x_te, f"{len(table.columns)} columns of {table.source}"))
        return AlignedTables(name=name, shards=tuple(shards), labels=labels, num_parties=self.num_parties,
                             class_names=table_of_labels.class_names)


@dataclass(frozen=True)
class AlignedTables:
    """Per-party files joined on a run's aligned rows, as an in-memory data source (``PartyTableSource.aligned``)."""

    name: str
    shards: tuple[PartyShard, ...]
    labels: LabelShard
    num_parties: int
    class_names: tuple[str, ...] = ()

    def partition(self) -> tuple[list[PartyShard], LabelShard]:
        return list(self.shards), self.labels

    def dataset(self) -> Dataset:
        lab = self.labels
        return Dataset(self.name, np.hstack([s.x_train for s in self.shards]), lab.y_train,
                       np.hstack([s.x_test for s in self.shards]), lab.y_test, lab.num_classes, metric=lab.metric,
                       class_names=self.class_names)
