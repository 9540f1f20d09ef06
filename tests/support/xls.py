"""A minimal legacy Excel (.xls, BIFF8) writer for the loader tests: no xlwt needed.

Writes the workbook stream bare (no OLE2 compound-document wrapper, which xlrd reads as it reads
the antique BIFF files): a globals substream (BOF, one BOUNDSHEET, EOF) and one worksheet of
LABEL (text, 8-bit) and NUMBER (float64) cells at XF 0. xlrd parses these records the same way as in
a file Excel wrote, so the loader's .xls branch runs on real cell records.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path


def _record(kind: int, data: bytes = b"") -> bytes:
    return struct.pack("<HH", kind, len(data)) + data


def _bof(substream: int) -> bytes:  # BIFF8 (0x0600); 0x0005 workbook globals, 0x0010 worksheet
    return _record(0x0809, struct.pack("<HHHHII", 0x0600, substream, 0x0DBB, 0x07CC, 0, 6))


def _cell(row: int, col: int, value: str | float) -> bytes:
    if isinstance(value, str):
        text = value.encode("latin-1")
        return _record(0x0204, struct.pack("<HHHHB", row, col, 0, len(text), 0) + text)  # LABEL
    return _record(0x0203, struct.pack("<HHHd", row, col, 0, float(value)))  # NUMBER


def write_xls(path: Path, rows: Sequence[Sequence[str | float]], *, sheet: str = "Data") -> Path:
    """One sheet with ``rows`` (empty strings are left as blank cells)."""
    name = sheet.encode("latin-1")

    def globals_(sheet_at: int) -> bytes:
        bound = _record(0x0085, struct.pack("<IBBBB", sheet_at, 0, 0, len(name), 0) + name)
        return _bof(0x0005) + bound + _record(0x000A)

    cells = b"".join(_cell(r, c, v) for r, row in enumerate(rows) for c, v in enumerate(row) if v != "")
    head = globals_(0)
    path.write_bytes(globals_(len(head)) + _bof(0x0010) + cells + _record(0x000A))
    return path
