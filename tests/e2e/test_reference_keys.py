"""Every key a run writes to summary.json and metrics.jsonl is in docs/reference.md (the key
reference with units): a new key without its line there fails here instead of reaching users
undocumented (``compiled_graph_choice`` did)."""

from __future__ import annotations

import re
from pathlib import Path

import vfl

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
TINY = {"params.b": 8, "data.train_subsample": 128, "data.test_subsample": 64, "train.epochs": 2,
        "privacy.target_epsilon": 50.0}  # calibrated: adds target_epsilon, calibrated


def documented(text: str) -> tuple[set[str], tuple[str, ...]]:
    """Names in backticks, ``name`` (``_up``, ``_down``) expanded, and ``prefix_*`` wildcards."""
    names = set(re.findall(r"`([A-Za-z0-9_.]+)`", text))
    for base, suffixes in re.findall(r"`([A-Za-z0-9_]+)` \(((?:`_[a-z]+`(?:, )?)+)\)", text):
        names |= {base + s for s in re.findall(r"`(_[a-z]+)`", suffixes)}
    prefixes = tuple(re.findall(r"`([A-Za-z0-9_]+)\*`", text))
    return names, prefixes


def test_documented_expands_the_reference_forms():
    names, prefixes = documented("| `a_bytes` (`_up`, `_down`) | `payload_bytes_*` | `seed` |")
    assert {"a_bytes_up", "a_bytes_down", "seed"} <= names and prefixes == ("payload_bytes_",)


def test_every_summary_and_metrics_key_of_a_run_is_in_the_reference():
    result = vfl.run("demo", overrides=TINY, transport="inprocess", progress=False)
    names, prefixes = documented(REFERENCE.read_text())
    keys = set(result.summary) | {k for row in result.history for k in row}
    missing = sorted(k for k in keys if k not in names and not k.startswith(prefixes))
    assert not missing, f"add these to docs/reference.md: {missing}"
