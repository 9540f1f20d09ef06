"""Finding and rewriting the generated blocks of the docs (``<!-- numbers: NAME -->`` ... ``<!-- /numbers -->``
on lines of their own, ``<!-- n: NAME -->`` ... ``<!-- /n -->`` inside a line)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulations.docs_numbers.render import RENDERERS
from vfl.core.errors import DataError

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = "docs/measurements"
# a block's body never holds another block's marker, and may be empty (a new block, not rendered yet)
BLOCK = re.compile(r"(<!-- numbers: (?P<name>[\w.\-]+) -->\n)(?P<body>(?:(?!<!-- /?numbers).)*?)(\n?<!-- /numbers -->)",
                   re.S)
INLINE = re.compile(r"(<!-- n: (?P<name>[\w.\-]+) -->)(?P<body>.*?)(<!-- /n -->)")


@dataclass(frozen=True)
class Mismatch:
    doc: str
    name: str
    found: str
    expected: str


def docs(root: Path = ROOT) -> list[Path]:
    """README.md and every page of docs/ (where generated numbers may sit)."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable measurement ({exc})") from None


def render(name: str, root: Path = ROOT) -> str:
    """The text of ``name`` (``FILE.KIND[.ARG...]``) from ``docs/measurements/FILE.json``."""
    file, _, rest = name.partition(".")
    kind, *args = rest.split(".") if rest else [""]
    fn = RENDERERS.get((file, kind))
    if fn is None:
        known = ", ".join(sorted(f"{f}.{k}" for f, k in RENDERERS))
        raise DataError(f"generated number {name!r}: no renderer {file}.{kind}; known: {known}")
    return fn(_load(root / MEASUREMENTS / f"{file}.json"), *args)


def _pass(text: str, root: Path, doc: str, bad: list[Mismatch] | None) -> str:
    def sub(m: re.Match[str]) -> str:
        want = render(m.group("name"), root)
        if bad is not None and m.group("body") != want:
            bad.append(Mismatch(doc, m.group("name"), m.group("body"), want))
        return m.group(1) + want + ("\n<!-- /numbers -->" if m.re is BLOCK else m.group(4))

    return INLINE.sub(sub, BLOCK.sub(sub, text))


def names(root: Path = ROOT) -> dict[str, list[str]]:
    """Every generated name per doc (relative path), in order."""
    out: dict[str, list[str]] = {}
    for path in docs(root):
        text = path.read_text()
        found = [m.group("name") for m in BLOCK.finditer(text)] + [m.group("name") for m in INLINE.finditer(text)]
        if found:
            out[path.relative_to(root).as_posix()] = found
    return out


def check(root: Path = ROOT) -> list[Mismatch]:
    """The generated blocks whose text is not what their JSON gives (nothing written)."""
    bad: list[Mismatch] = []
    for path in docs(root):
        _pass(path.read_text(), root, path.relative_to(root).as_posix(), bad)
    return bad


def regenerate(root: Path = ROOT) -> dict[str, int]:
    """Rewrite every generated block from its JSON; returns the number of blocks per doc that changed."""
    changed: dict[str, int] = {}
    for path in docs(root):
        bad: list[Mismatch] = []
        text = path.read_text()
        new = _pass(text, root, path.relative_to(root).as_posix(), bad)
        if new != text:
            path.write_text(new)
            changed[path.relative_to(root).as_posix()] = len(bad)
    return changed
