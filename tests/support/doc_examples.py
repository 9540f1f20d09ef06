"""The examples of README.md and docs/*.md, as a reader copies them: fenced ```python blocks and the
``vfl ...`` lines of fenced shell blocks (tests/engine/engine/test_docs_examples.py,
tests/unit/project/test_docs_cli_examples.py)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"```(?P<lang>[a-z]*)\n(?P<body>.*?)```", re.S)


@dataclass(frozen=True)
class Block:
    doc: str  # relative path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(lang: tuple[str, ...]) -> list[Block]:
    out = []
    for path in docs():
        text = path.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group("lang") in lang:
                out.append(Block(path.relative_to(ROOT).as_posix(), text[: m.start()].count("\n") + 1,
                                 m.group("lang"), m.group("body")))
    return out


def python_blocks() -> list[Block]:
    return blocks(("python", "py"))


def vfl_commands() -> list[tuple[Block, list[str]]]:
    """Every ``vfl ...`` command of the shell blocks (``&&`` and ``|`` split, comments and line
    continuations removed), as argv without the leading ``vfl``."""
    out = []
    for b in blocks(("bash", "sh", "shell", "console", "")):
        for line in b.code.replace("\\\n", " ").splitlines():
            code = line.strip().split(" #")[0]
            for part in re.split(r"\s*(?:&&|\|)\s*", code):
                if part.startswith("vfl "):
                    out.append((b, shlex.split(part)[1:]))
    return out
