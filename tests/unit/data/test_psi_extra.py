"""openmined-psi is the optional ``psi`` extra (it pins protobuf==6.30.2, so a core dependency made the
package uninstallable beside protobuf >= 6.31): without it, per-party files are one line naming the
extra and a command that works from a clone; with it, nothing changes."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from vfl.core.errors import ConfigError
from vfl.data import psi

ROOT = Path(__file__).resolve().parents[3]


def _without_psi(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if openmined-psi were not installed: importing it raises ImportError (a None entry in sys.modules)."""
    for name in [n for n in sys.modules if n.startswith("private_set_intersection")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "private_set_intersection", None)
    monkeypatch.setitem(sys.modules, "private_set_intersection.python", None)


def test_a_missing_psi_extra_is_one_line_naming_the_extra_and_a_clone_command(monkeypatch: pytest.MonkeyPatch):
    _without_psi(monkeypatch)
    with pytest.raises(ConfigError) as info:
        psi.require()
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("data.parties: ") and "'psi' extra" in text
    assert "pip install -e '.[psi]'" in text and "vfl-privacy[" not in text
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no ImportError traceback behind it
    with pytest.raises(ConfigError, match=r"'psi' extra"):  # every PSI step says the same, not a bare ImportError
        psi.PsiClient(["a"])


def test_with_the_psi_extra_installed_require_passes():
    pytest.importorskip("private_set_intersection.python", reason="the psi extra is not installed here")
    psi.require()


def test_openmined_psi_is_an_extra_not_a_core_dependency_and_make_setup_installs_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("openmined-psi") for d in project["dependencies"])
    assert any(d.startswith("openmined-psi") for d in project["optional-dependencies"]["psi"])
    setup = next(line for line in (ROOT / "Makefile").read_text().splitlines() if "pip install" in line and "-e '.[" in line)
    assert "psi" in setup.split("'.[")[1].split("]")[0].split(",")  # CI (make test) runs the PSI tests


def test_no_install_hint_names_a_package_that_is_not_on_an_index():
    """Hints must be commands that work from a clone: ``vfl-privacy`` is not on an index."""
    found = [f"{p.relative_to(ROOT)}" for folder in ("vfl", "parties", "strategies", "simulations", "docs")
             for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".yaml")
             and "vfl-privacy[" in p.read_text(encoding="utf-8")]
    assert found == []
