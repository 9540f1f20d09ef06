"""Keep a process that never compiles from importing ``torch._dynamo`` (~1.1 s of CPU in each Ray actor),
and a backward with given gradients from importing sympy (:func:`backward`, ~0.35 s and 34 MB per process).

torch wraps some ``Optimizer`` methods (``add_param_group``, ``zero_grad``, ``state_dict``,
``load_state_dict``) in ``torch._disable_dynamo``: on its first call the wrapper imports
``torch._dynamo``, builds ``torch._dynamo.disable(fn)`` and caches it as ``fn.__dynamo_disable``.
Outside Dynamo's tracing that disable wrapper only calls ``fn`` (the eval-frame hook it clears is
unset), and nothing can trace before ``torch._dynamo`` is imported. So while it is not imported,
:func:`skip_dynamo_import` fills that cache with ``fn`` itself: the same code runs, minus the import.
When ``torch._dynamo`` starts importing (``torch.compile``, anyone), a meta-path hook removes those
entries first, so torch then builds its real disable wrappers, exactly as without this module.
Anything unexpected in torch's internals (another wrapper, another cache name) skips a method or
the whole module: never an error.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
import types
from collections.abc import Sequence
from typing import Any

DYNAMO = "torch._dynamo"
_CACHE = "__dynamo_disable"  # torch._compile._disable_dynamo's per-function cache attribute
_lock = threading.RLock()  # re-entrant: rearm() may run inside skip_dynamo_import's imports
_filled: list[types.FunctionType] = []  # the undecorated functions whose cache holds themselves
_hook: _Rearm | None = None


class _Rearm(importlib.abc.MetaPathFinder):
    """Removes the pre-filled caches as soon as ``torch._dynamo`` starts importing (finds nothing itself)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None) -> None:
        if fullname == DYNAMO:
            rearm()
        return None


def skip_dynamo_import() -> int:
    """Pre-fill the disable caches of ``torch.optim.Optimizer``'s methods (idempotent); returns how many
    were filled by this call: 0 when ``torch._dynamo`` is already imported, already done, or torch differs."""
    global _hook
    if DYNAMO in sys.modules:
        return 0
    with _lock:
        if _hook is not None or DYNAMO in sys.modules:
            return 0
        import torch

        if DYNAMO in sys.modules:
            return 0
        inner = _inner_code(getattr(torch, "_disable_dynamo", None))
        if inner is None:
            return 0
        targets = [fn for f in vars(torch.optim.Optimizer).values() if (fn := _undecorated(f, inner)) is not None]
        if not targets:
            return 0
        _hook = _Rearm()
        sys.meta_path.insert(0, _hook)  # before anything that could import torch._dynamo below
        for fn in targets:
            setattr(fn, _CACHE, fn)
            _filled.append(fn)
        return len(targets)


def rearm() -> None:
    """Undo :func:`skip_dynamo_import`: torch's next call of each method builds its real disable wrapper."""
    global _hook
    with _lock:
        for fn in _filled:
            if vars(fn).get(_CACHE) is fn:  # still ours (torch replaces it only after we removed it)
                delattr(fn, _CACHE)
        _filled.clear()
        if _hook is not None:
            try:
                sys.meta_path.remove(_hook)
            except ValueError:  # someone else took it out
                pass
            _hook = None


def filled() -> tuple[types.FunctionType, ...]:
    """The functions whose disable cache is pre-filled now (for tests and diagnostics)."""
    return tuple(_filled)


def _inner_code(decorator: Any) -> types.CodeType | None:
    """The code of ``_disable_dynamo``'s wrapper if it caches in ``fn.__dynamo_disable`` as expected."""
    code = getattr(decorator, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    for const in code.co_consts:
        if (isinstance(const, types.CodeType) and const.co_name == "inner" and _CACHE in const.co_consts
                and _CACHE in const.co_names and {"fn", "recursive"} <= set(const.co_freevars)):
            return const
    return None


def _undecorated(f: Any, inner: types.CodeType) -> types.FunctionType | None:
    """The function ``f`` wraps when ``f`` is a ``_disable_dynamo`` wrapper with an empty cache, else None."""
    if not isinstance(f, types.FunctionType) or f.__code__ is not inner or f.__closure__ is None:
        return None
    cells = dict(zip(inner.co_freevars, f.__closure__, strict=True))
    try:
        fn = cells["fn"].cell_contents
    except ValueError:  # an empty cell
        return None
    if not isinstance(fn, types.FunctionType) or getattr(f, "__wrapped__", None) is not fn or _CACHE in vars(fn):
        return None
    return fn


SYMBOLIC = "torch.fx.experimental.symbolic_shapes"


def backward(outputs: Sequence[Any], grads: Sequence[Any]) -> None:
    """``torch.autograd.backward(outputs, grads)`` for plain tensors of concrete shapes, without torch's
    ``_make_grads``: its first call with a gradient tensor imports ``torch.fx.experimental.symbolic_shapes``
    and sympy (to compare shapes that may be symbolic) in every party process. The same checks here
    (equal shape, a floating gradient for a floating output), then the same engine call: identical
    gradients. Falls back to torch's own call where that engine entry is missing or the module is loaded."""
    import torch

    run = getattr(torch.autograd.graph, "_engine_run_backward", None)
    if run is None or SYMBOLIC in sys.modules or len(outputs) != len(grads):
        torch.autograd.backward(list(outputs), list(grads))
        return
    for out, g in zip(outputs, grads, strict=True):
        if (type(out) is not torch.Tensor or type(g) is not torch.Tensor or out.is_nested or out.shape != g.shape
                or out.dtype.is_floating_point != g.dtype.is_floating_point):
            torch.autograd.backward(list(outputs), list(grads))  # anything else: torch's own checks and errors
            return
    run(tuple(outputs), tuple(grads), False, False, (), allow_unreachable=True, accumulate_grad=True)

