"""Config of per-party data files (``data.parties``, ``data.labels``, ``data.split_parties``).

Real vertical FL starts from one table per party keyed by a sample ID; the rows are aligned by
private set intersection in the setup phase. These sections say where each party's table is.
Relative paths are resolved against ``data.data_dir`` (else ``$VFL_DATA_DIR``, else the working
directory); ``.csv`` and ``.parquet`` files are read. Every sample ID goes through ``canonical_id``
when its file is read, before duplicates are checked and before PSI sees it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from vfl.config.fields import param

Task = Literal["classification", "regression"]
_DIGITS = re.compile(r"[0-9]+(?:\.0*)?")


def _visible_nfc(text: str) -> str:
    """``text`` in Unicode NFC with invisible format characters (zero-width space and joiners, BOM, soft
    hyphen: category Cf) removed: two exports of one ID differ in neither."""
    if text.isascii():
        return text
    return "".join(ch for ch in unicodedata.normalize("NFC", text) if unicodedata.category(ch) != "Cf")


def normalised(raw: object) -> bool:
    """Whether ``canonical_id`` changed ``raw``'s characters (NFC, invisible ones), not only spaces or zeros."""
    text = str(raw)
    return _visible_nfc(text) != text


def canonical_id(raw: object) -> str:
    """The ID that PSI matches: Unicode NFC, invisible characters (zero-width, BOM) removed, surrounding
    spaces dropped; an all-digit ID (``007``, ``7.0``) written as its integer (``7``), so one party's
    zero-padded, float-typed or differently encoded column meets another's plain one instead of silently
    shrinking the intersection. Any other ID is kept exactly (case too)."""
    text = _visible_nfc(str(raw)).strip()
    if _DIGITS.fullmatch(text):
        return text.split(".", 1)[0].lstrip("0") or "0"
    return text


@dataclass(frozen=True)
class PartyFile:
    """One passive party's own table: an ID column and its feature columns."""

    path: str = param(help="the party's table (.csv or .parquet)")
    id: str = param(help="column holding the sample ID (customer number, e-mail hash...)")
    columns: tuple[str, ...] = param((), help="numeric feature columns (default: every column but the id)")
    standardize: bool = param(False, help="z-score the features with the aligned training rows' statistics")

    def __post_init__(self) -> None:
        _once("columns", (self.id, *self.columns), what="column (the id column included)")


@dataclass(frozen=True)
class LabelFile:
    """The label holder's (server's) table: an ID column, the label column, optionally the split."""

    path: str = param(help="the label holder's table (.csv or .parquet)")
    id: str = param(help="column holding the sample ID")
    label: str = param(help="column holding the class label (integers or names)")
    split: str | None = param(None, help="column with 'train'/'test' per row, broadcast as given (else the label "
                                         "holder draws a uniform, label-blind split of the aligned intersection)")
    test_fraction: float = param(0.25, gt=0, lt=1, help="test share of the intersection when split is not given")
    classes: tuple[int | str, ...] = param((), help="the allowed class labels as written in the file (e.g. [0, 1, 2] "
                                              "or [cat, dog]); a value outside them is refused, and the head "
                                              "gets one output per class in this order (default: the values "
                                              "present in the column)")
    task: Task = param(
        "classification", help="classification: the label column holds classes; regression: a numeric target "
                               "(finite numbers, metric rmse; only strategies that support regression take it)")

    def __post_init__(self) -> None:
        _once("label", (self.id, self.label) + ((self.split,) if self.split else ()),
              what="column among id, label and split")
        _once("classes", tuple(str(c) for c in self.classes), what="class")
        if self.task == "regression" and self.classes:
            raise ValueError("classes: a regression target has no classes; allowed: leave classes out with "
                             "task: regression")


def _once(key: str, names: tuple[str, ...], *, what: str) -> None:
    """Refuse a name given twice (ValueError: ``build`` reports it under the section's key)."""
    seen = [n for i, n in enumerate(names) if n in names[:i]]
    if seen:
        raise ValueError(f"{key}: {seen[0]!r} is given twice; allowed: each {what} once")


@dataclass(frozen=True)
class SplitParties:
    """Generate per-party files from the packaged ``dataset`` on first use (offline demos)."""

    overlap: float = param(0.8, gt=0, le=1, help="share of the samples every party (and the label holder) holds")
    dir: str | None = param(None, help="where to write them (default: $VFL_CACHE_DIR or ~/.cache/vfl)")
