"""CITATION.cff parses and carries what CFF 1.2.0 requires; LICENSE, pyproject and docs/citing.md agree with it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
PAPERS = {  # DOI -> a word of the title: the four papers the strategies implement
    "10.48550/arXiv.2501.13916": "PBM-VFL",
    "10.48550/arXiv.2412.16669": "Label Privacy",
    "10.48550/arXiv.2312.15603": "Split-and-Privatize",
    "10.1145/3133956.3133982": "Secure Aggregation",
}


def _cff() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text())


def _check_work(work: dict, where: str) -> None:
    for key in ("type", "title", "authors"):  # required in a CFF reference / preferred-citation
        assert work.get(key), f"{where}: missing {key}"
    for a in work["authors"]:
        assert a.get("family-names") or a.get("name"), f"{where}: an author without family-names or name"


def test_cff_required_keys() -> None:
    cff = _cff()
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):
        assert cff.get(key), f"CITATION.cff: missing {key}"
    assert cff["license"] == "Apache-2.0"
    _check_work(cff["preferred-citation"], "preferred-citation")
    for i, ref in enumerate(cff["references"]):
        _check_work(ref, f"references[{i}]")
        assert isinstance(ref.get("year"), int), f"references[{i}]: year"
    assert {r["doi"]: r["title"] for r in cff["references"]}.keys() == PAPERS.keys()
    for r in cff["references"]:
        assert PAPERS[r["doi"]] in r["title"]


def test_license_and_pyproject_agree() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and "[yyyy]" not in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lic = project["license"]
    assert (lic if isinstance(lic, str) else lic["text"]) == _cff()["license"]
    assert project["authors"] == [{"name": "The vfl-privacy authors"}] == [
        {"name": a["name"]} for a in _cff()["authors"]]
    assert project["version"] == str(_cff()["version"])


def test_citing_page_bibtex_matches_cff() -> None:
    page = (ROOT / "docs" / "citing.md").read_text()
    dois = set(re.findall(r"doi\s*=\s*\{([^}]+)\}", page))
    assert dois == PAPERS.keys()
    assert page.count("@software{") == 1
