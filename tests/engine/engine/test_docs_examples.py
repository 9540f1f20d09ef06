"""Every Python example of README.md and docs/*.md runs as printed (issue 48), cheaply: the runs are shared.

Each ```python block is executed as a reader pastes it (its own files — ``# my_pkg/models.py``, the strategy
module of docs/writing-a-strategy.md — written where it says, then imported). Its ``vfl.run`` /
``vfl.resume_run`` calls go through the real API (signature, config resolution with the example's
overrides and transport, the plugin's validation), and only the training is shared: one real tiny run
of the demo, whose rows are handed to the example's ``on_epoch_end`` and whose summary it reads (a key the
summary lacks fails). ``vfl.resolve``, ``vfl.validate`` and ``vfl.account`` run for real. A new block
that this test does not know how to run fails it. README's first example also runs unshared
(tests/engine/engine/test_readme_example.py), the strategy example with its own runs
(tests/e2e/test_writing_a_strategy.py)."""

from __future__ import annotations

import re
import sys
from types import SimpleNamespace

import pytest
import torch

import vfl
import vfl.engine.api as api
from tests.support.doc_examples import python_blocks
from vfl.core.plugins import backend
from vfl.engine.strategy import STRATEGIES

TINY = {"params.b": 8, "data.train_subsample": 128, "data.test_subsample": 64, "train.epochs": 2}
FILE = re.compile(r"^# (?P<path>[\w/]+\.py)\n")  # a block that is a file: `# my_pkg/models.py`
IMPORTED = re.compile(r"^import (?P<mod>\w+)\s+# the file above", re.M)


@pytest.fixture(scope="module")
def shared():
    """One real in-process run of the demo (tiny), its engine as ``on_epoch_end`` saw it."""
    seen = {}
    result = vfl.run("demo", overrides=TINY, transport="inprocess", progress=False,
                     on_epoch_end=lambda e, row, eng: seen.update(engine=eng))
    return SimpleNamespace(summary=result.summary, history=result.history, engine=seen["engine"])


class SharedBackend:
    """The backend's ``execute`` / ``resume_run`` replaced by the shared run (everything before them is real)."""

    def __init__(self, run):
        self.run, self.configs, self.executed = run, {}, []

    def execute(self, cfg, *, out_dir=None, progress=None, note="", on_epoch_end=None, on_step=None):
        self.executed.append(cfg)
        if out_dir is not None:
            self.configs[str(out_dir)] = cfg.to_dict()
        for epoch, row in enumerate(self.run.history):
            if on_epoch_end is not None:
                on_epoch_end(epoch, row, self.run.engine)
        return SimpleNamespace(summary={**self.run.summary, "strategy": cfg.strategy}, history=self.run.history)

    def resume_run(self, run_dir, **kw):
        assert str(run_dir) in self.configs, f"the example resumes {run_dir}, which it did not run"
        return self.execute(backend().resolve_config(self.configs[str(run_dir)], kw.get("overrides") or []))


def _exercise_file(path: str, module) -> None:
    """What the page says a file is for: a bottom factory, a dataset factory, a strategy."""
    if hasattr(module, "MyBottom"):
        out = module.MyBottom(input_shape=(16,), embed_dim=16)(torch.zeros(3, 16))
        assert tuple(out.shape) == (3, 16), path
        vfl.resolve("demo", overrides=[f"model.bottom={path[:-3].replace('/', '.')}:MyBottom"])
    elif hasattr(module, "make_dataset"):
        data = module.make_dataset(seed=0, n=50)
        assert {"x_train", "y_train", "x_test", "y_test"} <= set(data) and len(data["y_train"]) == 40, path
        vfl.resolve("demo", overrides=[f"dataset={path[:-3].replace('/', '.')}:make_dataset", "num_parties=2"])
    else:
        pytest.fail(f"{path}: a file of the docs this test does not know how to run")


def test_every_python_example_of_the_docs_runs(shared, tmp_path, monkeypatch, capsys):
    blocks = python_blocks()
    assert len(blocks) >= 6  # README, usage.md (3), writing-a-strategy.md (2)
    fake = SharedBackend(shared)
    b = backend()
    monkeypatch.setattr(b, "execute", fake.execute)
    monkeypatch.setattr(b, "resume_run", fake.resume_run)
    monkeypatch.setattr(api, "_stored_config", lambda run_dir: fake.configs[str(run_dir)])
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = {m.group("mod") for blk in blocks for m in IMPORTED.finditer(blk.code)}  # files a later block imports
    strategy = next(blk for blk in blocks if "@register" in blk.code)
    assert len(modules) == 1, modules  # writing-a-strategy's `import my_half  # the file above`
    (tmp_path / f"{modules.pop()}.py").write_text(strategy.code)
    ran = []
    try:
        for blk in blocks:
            if blk is strategy:
                continue  # imported by the block after it, as the page says
            file = FILE.match(blk.code)
            if file:
                path = tmp_path / file.group("path")
                path.parent.mkdir(parents=True, exist_ok=True)
                (path.parent / "__init__.py").touch()
                path.write_text(blk.code)
                module = __import__(file.group("path")[:-3].replace("/", "."), fromlist=["_"])
                _exercise_file(file.group("path"), module)
            else:
                exec(compile(blk.code, blk.where, "exec"), {"__name__": "__doc_example__"})
            ran.append(blk.where)
    finally:
        for name in [n for n in sys.modules if n.startswith(("my_pkg", "my_half"))]:
            sys.modules.pop(name)
        STRATEGIES._items.pop("half", None)
        STRATEGIES._help.pop("half", None)
    assert len(ran) == len(blocks) - 1  # each block ran (the strategy one through its import)
    assert {cfg.strategy for cfg in fake.executed} >= {"pbm", "half"}  # README/usage's demo, the half strategy
    assert any(cfg.transport.kind == "ray" for cfg in fake.executed)  # `transport="ray"`: resolved, not started
    out = capsys.readouterr().out
    assert "per-release" in out  # README's print of the summary's epsilon_scope
