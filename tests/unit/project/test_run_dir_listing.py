"""Every file a run directory holds is named where README and docs/failures.md list its contents,
the hidden ones included (``.lock``, ``.vfl-origin``)."""

from __future__ import annotations

from pathlib import Path

from vfl.engine.lock import LOCK_FILE
from vfl.engine.rundir import CONFIG
from vfl.engine.trust import ORIGIN

ROOT = Path(__file__).resolve().parents[3]


def test_hidden_run_files_are_listed() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listing = (ROOT / "docs" / "failures.md").read_text(encoding="utf-8").split("## The run directory", 1)[1]
    missing = [(doc, name) for doc, text in (("README.md", readme), ("docs/failures.md", listing[:2000]))
               for name in (LOCK_FILE, ORIGIN, CONFIG, "metrics.jsonl", "summary.json", "privacy_ledger.jsonl")
               if f"`{name}`" not in text and f"  {name} " not in text]
    assert missing == []
