"""``vfl.run`` in a notebook: which progress display it picks (vfl/engine/progress.py, environment injected),
that the kernel fallback really prints one line per epoch, and that the API keeps the CLI's options
and names its different default transport."""

from __future__ import annotations

import inspect
import types

import pytest

import vfl
import vfl.engine.api
from simulations.cli.main import _parser as build_parser
from vfl.engine.progress import (
    Environment,
    choose,
    detect,
    draws_widgets,
    engine_progress,
    in_kernel,
)

TERMINAL = Environment(kernel=False, notebook_bar=False)
NOTEBOOK = Environment(kernel=True, notebook_bar=True)
BARE_KERNEL = Environment(kernel=True, notebook_bar=False)  # a kernel without ipywidgets


@pytest.mark.parametrize(("progress", "env", "mode", "engine"), [
    (None, TERMINAL, "terminal", None),   # today's bar: tqdm draws it only on a terminal
    (True, TERMINAL, "terminal", True),
    (None, NOTEBOOK, "notebook", True),   # tqdm.auto's widget bar, drawn whatever stdout is
    (True, NOTEBOOK, "notebook", True),
    (None, BARE_KERNEL, "lines", False),  # no widgets: lines, not a garbled \r bar
    (False, NOTEBOOK, "off", False),
    (False, TERMINAL, "off", False),
])
def test_the_display_follows_the_environment(progress, env, mode, engine):
    assert choose(progress=progress, env=env) == mode
    assert engine_progress(mode, progress) is engine


def _ipython(shell: object) -> types.SimpleNamespace:
    return types.SimpleNamespace(get_ipython=lambda: shell)


def test_a_kernel_is_ipykernel_with_a_shell_that_has_a_kernel():
    kernel_shell = types.SimpleNamespace(kernel=object())
    assert in_kernel({"ipykernel": object(), "IPython": _ipython(kernel_shell)})
    assert not in_kernel({"IPython": _ipython(kernel_shell)})                        # no ipykernel loaded
    assert not in_kernel({"ipykernel": object(), "IPython": _ipython(None)})         # plain python
    assert not in_kernel({"ipykernel": object(), "IPython": _ipython(object())})     # terminal IPython
    assert detect(modules={}) == TERMINAL


def test_tqdm_autos_notebook_class_counts_as_a_widget_bar():
    import tqdm.asyncio
    import tqdm.notebook
    import tqdm.std

    class Auto(tqdm.notebook.tqdm, tqdm.asyncio.tqdm):  # how tqdm.auto builds its bar inside a kernel
        pass

    Auto.__module__ = "tqdm.auto"
    assert Auto.__module__ != "tqdm.notebook"  # control: the old check (own __module__) missed it
    assert draws_widgets(Auto) and draws_widgets(tqdm.notebook.tqdm)
    assert not draws_widgets(tqdm.asyncio.tqdm) and not draws_widgets(tqdm.std.tqdm)  # tqdm.auto off a kernel


def test_the_api_default_transport_differs_from_the_cli_and_says_so():
    run_default = inspect.signature(vfl.run).parameters["transport"].default
    assert run_default == "inprocess" and vfl.resolve("demo").transport.kind == "ray"  # the CLI's: the config's
    assert build_parser().parse_args(["run", "demo"]).transport is None
    assert "transport=None" in (vfl.run.__doc__ or "") and "vfl run" in (vfl.run.__doc__ or "")


def test_a_cluster_address_keeps_ray_as_the_cli_does():
    assert vfl.engine.api._api_transport("demo", (), "10.0.0.1:6379") is None  # `--address` implies ray
    assert vfl.engine.api._api_transport("demo", {"transport.address": "10.0.0.1:6379"}, None) is None
    with pytest.raises(vfl.ConfigError):  # what the in-process default met before: a refusal
        vfl.resolve("demo", transport="inprocess", address="10.0.0.1:6379")
    assert vfl.resolve("demo", transport=None, address="10.0.0.1:6379").transport.kind == "ray"


def test_every_vfl_run_option_has_its_api_keyword():
    run_parser = build_parser()._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    dests = {a.dest for a in run_parser._actions} - {"help", "config", "dry_run", "trust_code"}
    api = {"overrides": "overrides", "out": "out_dir", "transport": "transport", "address": "address",
           "resume": "run_dir", "no_progress": "progress"}
    assert dests == set(api)  # a new `vfl run` flag must be mapped here (and given to vfl.run)
    keywords = set(inspect.signature(vfl.run).parameters) | set(inspect.signature(vfl.resume_run).parameters)
    assert {api[d] for d in dests} <= keywords
