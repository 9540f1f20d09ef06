"""docs/README.md's module map names every module of the four packages, and every ``file.py:Name`` that
docs/architecture.md walks through exists (a class's ``Name.member`` defined in its body): the reading
guides stay true to the tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("vfl", "parties", "strategies", "simulations")
CALL = re.compile(r"`((?:vfl|parties|strategies|simulations)/[a-z_0-9/]+\.py):([A-Za-z_][A-Za-z_0-9.]*)")


def _tree() -> set[str]:
    """What the module map must list: every folder of the four packages and their sub-folders (not
    ``parties/llm/``'s, which the llm row names), every module at a package root (``simulations/plugin.py``),
    and ``strategies/<name>.py`` for the per-strategy modules."""
    out: set[str] = set()
    for package in PACKAGES:
        for p in sorted((ROOT / package).rglob("*")):
            rel = p.relative_to(ROOT).as_posix()
            if "__pycache__" in rel or rel.startswith("parties/llm/"):
                continue
            if p.is_dir() and ((p / "__init__.py").exists() or p.name == "configs") and rel.count("/") <= 2:
                out.add(rel + "/")
            elif p.suffix == ".py" and rel.count("/") == 1 and p.name != "__init__.py":
                out.add("strategies/<name>.py" if package == "strategies" else rel)
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


def test_the_module_map_is_the_tree() -> None:
    text = (ROOT / "docs" / "README.md").read_text()
    table = text[text.index("## Module map"):]
    named = set(re.findall(r"^\| `([a-z_/<>.]+)` \|", table, flags=re.M))
    tree = _tree()
    assert len(tree) > 20  # the four packages were found
    assert named == tree, (f"docs/README.md's module map lacks {sorted(tree - named)} and names what is not in the tree: "
                           f"{sorted(named - tree)}")


def test_the_per_strategy_row_names_every_strategy_module() -> None:
    text = (ROOT / "docs" / "README.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `strategies/<name>.py`"))
    modules = {p.stem for p in (ROOT / "strategies").glob("*.py") if p.name != "__init__.py"}
    assert set(re.findall(r"`([a-z_0-9]+)`", row)) == modules


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
