"""docs/quickstart.ipynb: shipped without outputs, and executed in a real Jupyter kernel (nbclient +
ipykernel, skipped where they are not installed) it runs ``vfl.run`` with a progress display that
fits the kernel (tqdm's widget bar with ipywidgets, else one line per epoch) and prints the result."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "quickstart.ipynb"
WIDGET = "application/vnd.jupyter.widget-view+json"


def test_the_shipped_notebook_has_no_outputs():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)


def _this_python_kernel(root: Path) -> None:
    """A ``python3`` kernelspec running this interpreter, first on JUPYTER_PATH: a user's own
    ``python3`` kernel (another Python, without vfl) must not be the one tested."""
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "vfl test", "language": "python"}))


def test_the_notebook_runs_in_a_real_kernel(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    _this_python_kernel(tmp_path / "jupyter")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))  # connection files
    work = tmp_path / "work"
    work.mkdir()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(work)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.name == "stdout")
    widgets = [o for o in outputs if o.output_type == "display_data" and WIDGET in o.data]
    if importlib.util.find_spec("ipywidgets") is not None:  # tqdm.auto picks tqdm.notebook
        assert any("demo epochs" in o.data["text/plain"] for o in widgets)
        assert "epoch 1/1 " not in text
    else:  # no widgets: one plain line per epoch, no \r-garbled bar
        assert not widgets and "epoch 1/1 loss " in text
    acc, eps, scope = _result_line(text)
    assert 0.0 <= float(acc) <= 1.0 and float(eps) > 0 and "PBM-VFL" in scope
    assert "'beta'" in "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert list(work.iterdir()) == []  # no out_dir: the run writes nothing


def _result_line(text: str) -> tuple[str, str, str]:
    """The line the second cell prints: final_test_acc, epsilon, epsilon_scope."""
    line = next(ln for ln in text.splitlines() if "PBM-VFL" in ln)
    acc, eps, scope = line.split(" ", 2)
    return acc, eps, scope
