"""No test passes by checking nothing: a test whose every assert sits inside a loop that could run
zero times (over a computed list, a registry, a log) passes when the list is empty. Such a test must
also assert that the loop had something to check (a length, a counter). Loops over a non-empty
literal (a tuple, ``range(3)``) cannot be empty and count as checked."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def _iter_never_empty(it: ast.expr) -> bool:
    if isinstance(it, (ast.Tuple, ast.List, ast.Set)):
        return bool(it.elts) and not any(isinstance(e, ast.Starred) for e in it.elts)
    if isinstance(it, ast.Constant):
        return isinstance(it.value, str) and bool(it.value)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.args:
        if it.func.id == "range" and all(isinstance(a, ast.Constant) and isinstance(a.value, int) for a in it.args):
            return len(range(*[a.value for a in it.args])) > 0  # type: ignore[union-attr]
        if it.func.id == "enumerate":
            return _iter_never_empty(it.args[0])
        if it.func.id == "zip":
            return all(_iter_never_empty(a) for a in it.args)
    return False


def _never_empty(loop: ast.AST) -> bool:
    if isinstance(loop, ast.While):
        return isinstance(loop.test, ast.Constant) and bool(loop.test.value)
    return isinstance(loop, (ast.For, ast.AsyncFor)) and _iter_never_empty(loop.iter)


def _asserts(fn: ast.AST) -> list[bool]:
    """For each assert of ``fn`` (not of nested functions): does it sit in a loop that may not run?"""
    out: list[bool] = []

    def walk(node: ast.AST, guarded: bool) -> None:
        for field, value in ast.iter_fields(node):
            for child in value if isinstance(value, list) else [value]:
                if not isinstance(child, ast.AST) or isinstance(
                        child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                    continue
                inner = guarded or (isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and field == "body"
                                    and not _never_empty(node))
                if isinstance(child, ast.Assert):
                    out.append(inner)
                walk(child, inner)

    walk(fn, False)
    return out


def vacuous_tests(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.startswith("test"):
                flags = _asserts(fn)
                if flags and all(flags):
                    found.append(f"{path.relative_to(root.parent).as_posix()}:{fn.lineno}: {fn.name}")
    return found


def test_no_test_asserts_only_inside_loops_that_could_run_zero_times():
    assert vacuous_tests(TESTS) == []


def test_the_scan_finds_a_loop_only_test_and_accepts_its_fix(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "def test_bad(xs):\n    for x in xs:\n        assert x\n\n"
        "def test_counted(xs):\n    for x in xs:\n        assert x\n    assert len(xs) == 3\n\n"
        "def test_literal():\n    for x in (1, 2):\n        assert x\n\n"
        "def test_nested(xs):\n    for k in (1, 2):\n        for x in xs:\n            assert x\n")
    assert [s.split(": ")[1] for s in vacuous_tests(tmp_path / "tests")] == ["test_bad", "test_nested"]
