"""Every figure the project writes has a PDF beside its PNG (vector, for a paper): run plots and
report figures draw their own pair through ``simulations.report.style.save``, every other figure goes through
``simulations.report.plots.save_png_pdf`` (the same function)."""

from __future__ import annotations

import ast
from pathlib import Path

import matplotlib.pyplot as plt

from simulations.benchmarks import scaling
from simulations.report.plots import save_png_pdf

SIMULATIONS = Path(__file__).resolve().parents[3] / "simulations"
PAIR_WRITERS = {"report/style.py"}  # style.save writes the PNG and its PDF (plots.py, figures.py and sweeps use it)


def test_save_png_pdf_writes_both_and_closes_the_figure(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    png = save_png_pdf(fig, tmp_path / "curve.png")
    assert png == tmp_path / "curve.png" and png.read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "curve.pdf").read_bytes().startswith(b"%PDF")
    assert not plt.fignum_exists(fig.number)


def test_a_benchmark_figure_has_its_pdf(tmp_path):
    rows = [{"parties": m, "step_ms": 2.0 * m, "rss_gib": 0.5 * m} for m in (2, 4, 8)]
    scaling.plot(rows, tmp_path / "scaling.png")
    assert (tmp_path / "scaling.png").exists() and (tmp_path / "scaling.pdf").read_bytes().startswith(b"%PDF")


def test_no_figure_is_saved_as_a_png_alone():
    lone = []
    for path in sorted(SIMULATIONS.rglob("*.py")):
        rel = path.relative_to(SIMULATIONS).as_posix()
        if rel in PAIR_WRITERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "savefig":
                lone.append(f"{rel}:{node.lineno}")
    assert not lone, f"use simulations.report.plots.save_png_pdf (PNG + PDF) at {lone}"
