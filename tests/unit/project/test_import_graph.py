"""The project's import graph has no circles and `vfl/` never imports the layers above it."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("vfl", "parties", "strategies", "simulations")
UPPER = ("parties", "strategies", "simulations")

# Circles not yet untied, each a sorted tuple of module names. This list may only shrink.
ALLOWED_CIRCLES: set[tuple[str, ...]] = set()  # none left; a new circle is untied, not listed


def _modules() -> dict[str, Path]:
    """Every module of the four packages by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name a relative `from ... import` in `module` refers to."""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules `module` imports anywhere in its file: module level, inside functions and under
    ``if TYPE_CHECKING:`` (a circle through annotations is still a circle of the design)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()

    def known(name: str) -> str | None:
        """The longest prefix of `name` that is a project module, or None."""
        parts = name.split(".")
        while parts:
            candidate = ".".join(parts)
            if candidate in modules:
                return candidate
            parts.pop()
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                hit = known(alias.name)
                if hit:
                    out.add(hit)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                source = _resolve_relative(module, is_package, node.level, node.module)
            else:
                source = node.module or ""
            if source.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                hit = sub if sub in modules else known(source)
                if hit:
                    out.add(hit)
    # importing a.b.c.d from outside a.b runs the __init__ of a.b (and a.b.c) first: their imports are this
    # module's too (a module inside a package always finds its package initialised; the top-level packages'
    # faces are left out: they only hand names on, lazily)
    for target in list(out):
        parts = target.split(".")
        for i in range(2, len(parts)):
            package = ".".join(parts[:i])
            if package in modules and not module.startswith(package + "."):
                out.add(package)
    out.discard(module)
    return out


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (read once per session: the tests only read it)."""
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[tuple[str, ...]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        # iterative Tarjan: (node, iterator over its successors)
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))
    return sorted(found)


def test_circle_finder_finds_a_planted_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"} - {"e"}}
    assert circles(graph) == [("a", "b", "c")]


def test_the_graph_sees_function_level_and_submodule_imports() -> None:
    graph = import_graph()
    assert len(graph) > 100
    # `from vfl import errors` is an edge to the submodule vfl.core.errors, not to the package
    assert any("vfl.core.errors" in targets for targets in graph.values())


def test_no_import_circles() -> None:
    found = set(circles(import_graph()))
    new = sorted(found - ALLOWED_CIRCLES)
    assert not new, "import circles:\n" + "\n".join(" <-> ".join(c) for c in new)
    stale = sorted(ALLOWED_CIRCLES - found)
    assert not stale, "untied circles still in ALLOWED_CIRCLES (remove them):\n" + "\n".join(
        " <-> ".join(c) for c in stale
    )


def test_vfl_never_imports_the_layers_above() -> None:
    graph = import_graph()
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        if source.split(".")[0] == "vfl"
        for target in targets
        if target.split(".")[0] in UPPER
    )
    assert not upward, "vfl/ imports the layers above it:\n" + "\n".join(upward)


ROOT_LIMIT = 6  # modules directly under vfl/ and parties/ (besides __init__.py): the rest lives in feature folders


def rooms(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between the folders of each package (``vfl.runtime``, ``parties.secagg``, ...): a module stands
    for its folder two levels down (a root module for itself); a package's face (``vfl/__init__.py``, which
    only hands the public names on) is left out."""

    def room(name: str) -> str:
        return ".".join(name.split(".")[:2])

    out: dict[str, set[str]] = {}
    for source, targets in graph.items():
        if source in PACKAGES:
            continue
        mine = out.setdefault(room(source), set())
        mine.update(room(t) for t in targets if t not in PACKAGES and room(t) != room(source))
    return out


def test_no_circles_between_feature_folders() -> None:
    found = circles(rooms(import_graph()))
    assert not found, "folders that import each other:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_room_finder_sees_a_folder_circle() -> None:
    graph = {"vfl.a.x": {"vfl.b.y"}, "vfl.b.y": {"vfl.b.z"}, "vfl.b.z": {"vfl.a.w"}, "vfl.a.w": set(), "vfl": {"vfl.a.x"}}
    assert circles(rooms(graph)) == [("vfl.a", "vfl.b")]


def test_package_roots_hold_few_modules() -> None:
    for package in ("vfl", "parties"):
        loose = sorted(p.name for p in (ROOT / package).glob("*.py") if p.name != "__init__.py")
        assert len(loose) <= ROOT_LIMIT, f"{package}/ holds {len(loose)} loose modules (at most {ROOT_LIMIT}): {loose}"


def test_no_product_module_reads_a_test_hook() -> None:
    hooks = ("VFL_TEST_HOOKS", "VFL_SECAGG_AUDIT")
    found = [f"{p.relative_to(ROOT)}: {h}" for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
             for h in hooks if h in p.read_text()]
    assert not found, "test hooks in the product:\n" + "\n".join(found)
