"""README's first Python example, copied as a newcomer copies it, runs clean: no warning of any kind
(the in-process default over the demo's Ray config used to warn every time)."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

import vfl.engine.api

README = Path(__file__).resolve().parents[3] / "README.md"


def first_example() -> str:
    """The statements of README's first ```python block up to its first print() (the run and its
    result; the lines after it start Ray and account, outside this lane)."""
    block = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert block, "README has no python example"
    tree = ast.parse(block.group(1))
    end = next(i for i, s in enumerate(tree.body)
               if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and getattr(s.value.func, "id", "") == "print")
    return ast.unparse(ast.Module(body=tree.body[: end + 1], type_ignores=[]))


@pytest.mark.filterwarnings("error")  # also what pytest reports after the test (an unclosed file's ResourceWarning)
def test_readme_first_example_raises_no_warning(monkeypatch, tmp_path, capsys) -> None:
    code = first_example()
    assert "vfl.run(" in code and "print(" in code
    monkeypatch.setattr(vfl.engine.api, "_noted_transport", [])  # as in a fresh interpreter
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the example
        exec(compile(code, str(README), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert len(out) >= 2 and "per-release" in out[-1]  # the final print: accuracy, ε and its scope
