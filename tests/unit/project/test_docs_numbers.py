"""The docs' measured numbers are the JSON's (issue 48): every generated block of README.md and docs/*.md
(``<!-- numbers: NAME -->``, ``<!-- n: NAME -->``) holds what ``python -m simulations.docs_numbers`` renders
from ``docs/measurements/*.json``; an edited number in a doc, or a changed number in a JSON, fails here
(the control below edits both in a copy)."""

from __future__ import annotations

import json
import shutil

import pytest

from simulations.docs_numbers import ROOT, check, regenerate
from simulations.docs_numbers.blocks import MEASUREMENTS, names, render
from vfl.core.errors import DataError


def test_every_generated_number_in_the_docs_is_the_jsons():
    bad = check()
    assert not bad, "run `python -m simulations.docs_numbers` (make docs-numbers):\n" + "\n".join(
        f"{m.doc}: {m.name}: doc {m.found!r} != JSON {m.expected!r}" for m in bad)


def test_the_readme_and_the_measured_tables_are_generated():
    found = names()
    assert {"peers.step_ms.vfl.ray.5", "peers.step_ms.flower.flwr-simulation-ray.5"} <= set(found["README.md"])
    assert {"peers.table", "local_steps.table", "scaling.table"} <= set(found["docs/performance.md"])
    assert {"comm_cost.table", "local_steps.short", "p3eft_table.table"} <= set(found["docs/benchmarks.md"])
    used = {n.split(".", 1)[0] for doc in found.values() for n in doc}
    kept = {p.stem for p in (ROOT / MEASUREMENTS).glob("*.json")}
    assert used == kept  # every kept JSON is cited, every cited JSON is kept
    assert all(p.stat().st_size < 20_000 for p in (ROOT / MEASUREMENTS).glob("*.json"))  # small


@pytest.fixture
def copy(tmp_path):
    """README.md, docs/*.md and docs/measurements/ in a temp root (the control edits them there)."""
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("*.ipynb"))
    return tmp_path


def test_an_edited_doc_number_or_json_number_fails_and_regenerating_repairs_it(copy):
    perf = copy / "docs" / "performance.md"
    perf.write_text(perf.read_text().replace("| vfl | ray | 5 | 9.6 |", "| vfl | ray | 5 | 5.5 |", 1))
    (bad,) = check(copy)
    assert (bad.doc, bad.name) == ("docs/performance.md", "peers.table") and "5.5" in bad.found
    data = json.loads((copy / MEASUREMENTS / "peers.json").read_text())
    next(r for r in data["rows"] if r["transport"] == "ray" and r["parties"] == 5)["step_ms"] = 7.7
    (copy / MEASUREMENTS / "peers.json").write_text(json.dumps(data))
    assert {m.name for m in check(copy)} >= {"peers.table", "peers.step_ms.vfl.ray.5", "peers.speedup.ray.5"}
    regenerate(copy)
    assert check(copy) == []
    assert "<!-- n: peers.step_ms.vfl.ray.5 -->7.7<!-- /n -->" in (copy / "README.md").read_text()


def test_a_new_empty_block_is_filled_and_the_text_between_blocks_kept(copy):
    """An empty block (just added) once matched up to the next block's end and ate the prose between them."""
    doc = copy / "docs" / "new.md"
    doc.write_text("<!-- numbers: trees_exact.table -->\n<!-- /numbers -->\n\nKEEP ME\n\n"
                   "<!-- numbers: paillier.table -->\n<!-- /numbers -->\nAND ME\n")
    assert {m.name for m in check(copy)} == {"trees_exact.table", "paillier.table"}
    regenerate(copy)
    text = doc.read_text()
    assert "\n\nKEEP ME\n\n" in text and text.endswith("<!-- /numbers -->\nAND ME\n")
    assert text.count("<!-- /numbers -->") == 2 and "| breast-cancer" in text and "2048-bit" in text
    assert check(copy) == []


def test_an_unknown_name_is_one_line_naming_the_known_ones():
    with pytest.raises(DataError, match="no renderer peers.nope; known: .*peers.table"):
        render("peers.nope")


def test_the_attack_count_the_docs_show_is_the_reports():
    """docs/attacks.md's progress lines (``attack 4/14 membership``) count what `vfl report` runs (it showed
    4/13 while the report counted 14)."""
    import re

    from simulations.report.render import ORDER, RUN_ATTACKS

    total = len(RUN_ATTACKS)
    shown = re.findall(r"`attack (\d+)/(\d+) (\w+)", (ROOT / "docs" / "attacks.md").read_text())
    assert shown and all(int(n) == total for _, n, _ in shown), (shown, total)
    order = [*[n for n in ORDER if n in RUN_ATTACKS], *[n for n in RUN_ATTACKS.names() if n not in ORDER]]
    assert all(order[int(k) - 1] == name for k, _, name in shown), shown
