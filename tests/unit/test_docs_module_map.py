"""docs/README.md's module map names every module of the four packages, and every ``file.py:Name`` that
docs/architecture.md walks through exists (a class's ``Name.member`` defined in its body): the reading
guides stay true to the tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("vfl", "parties", "strategies", "simulations")
CALL = re.compile(r"`((?:vfl|parties|strategies|simulations)/[a-z_0-9/]+\.py):([A-Za-z_][A-Za-z_0-9.]*)")


def _top_level(package: str) -> list[str]:
    """The modules and subpackages directly inside ``package``."""
    out = []
    for p in sorted((ROOT / package).iterdir()):
        if p.suffix == ".py" and p.name != "__init__.py":
            out.append(p.stem)
        elif p.is_dir() and (p / "__init__.py").exists() or p.is_dir() and p.name == "configs":
            out.append(p.name)
    return out


def _defined(path: Path) -> dict[str, set[str] | None]:
    """Top-level names of ``path`` -> the names its class body defines (None for functions and constants)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: dict[str, set[str] | None] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            body = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            body |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
            body |= {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
            names[node.name] = body
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names[node.name] = None
        elif isinstance(node, ast.Assign):
            names.update({t.id: None for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
    return names


def test_the_module_map_names_every_module() -> None:
    text = (ROOT / "docs" / "README.md").read_text()
    named = set(re.findall(r"`([a-z_0-9]+)/?`", text)) | set(re.findall(r"`[a-z_]+/([a-z_0-9]+)`", text))
    checked = [(pkg, m) for pkg in PACKAGES for m in _top_level(pkg)]
    assert len(checked) > 80  # the four packages were found
    missing = [f"{pkg}/{m}" for pkg, m in checked if m not in named]
    assert not missing, f"docs/README.md's module map does not name: {', '.join(missing)}"


def test_every_call_architecture_md_names_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    calls = CALL.findall(text)
    assert len(calls) > 20  # the walk-through was read
    wrong = []
    for file, name in calls:
        path = ROOT / file
        if not path.exists():
            wrong.append(f"{file} (no such file)")
            continue
        top, _, member = name.partition(".")
        defined = _defined(path)
        body = defined.get(top)
        if top not in defined or (member and body is not None and member.split(".")[0] not in body):
            wrong.append(f"{file}:{name}")
    assert not wrong, f"docs/architecture.md names what the tree does not have: {', '.join(wrong)}"
