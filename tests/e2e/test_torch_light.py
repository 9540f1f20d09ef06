"""vfl.runtime.fast.torch_light: optimizers made without importing torch._dynamo, bit-identical training, torch's real
disable wrappers back as soon as torch._dynamo is imported, and no-op on a torch it does not recognize.

Each check runs in a fresh interpreter: the test session may have imported torch._dynamo already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

from vfl.runtime.fast import torch_light

TRAIN = """
import hashlib, json, sys, torch
from vfl.runtime.fast.torch_step import step_all
from vfl.runtime.optim import make_optimizer
out = {}
for name in ("sgd", "adam", "adamw", "sgd-own"):  # -own: torch's own step(), which imports torch._dynamo itself
    if name == "sgd-own":
        out["dynamo"] = "torch._dynamo" in sys.modules
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    opt = make_optimizer(model.parameters(), name=name.removesuffix("-own"), lr=0.05, momentum=0.9, weight_decay=0.01)
    x, y = torch.randn(32, 7), torch.randint(0, 3, (32,))
    for _ in range(5):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step() if name.endswith("-own") else step_all([opt])  # step_all: the nodes' fused step
    opt.load_state_dict(opt.state_dict())
    h = hashlib.sha256()
    for t in [*model.state_dict().values()]:
        h.update(t.numpy().tobytes())
    out[name] = h.hexdigest()
print(json.dumps(out))
"""


def _run(code: str) -> Any:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_training_is_bit_identical_without_the_dynamo_import() -> None:
    light = _run(TRAIN)  # make_optimizer pre-fills the caches: torch._dynamo never imported
    vanilla = _run("import torch._dynamo\n" + TRAIN)  # imported first: torch's own disable wrappers
    assert light.pop("dynamo") is False and vanilla.pop("dynamo") is True
    assert light == vanilla and len(light) == 4


def test_importing_dynamo_later_restores_torchs_own_disable() -> None:
    out = _run("""
        import json, sys, torch
        from vfl.runtime.fast import torch_light
        n = torch_light.skip_dynamo_import()
        fns = torch_light.filled()
        hooked = any(isinstance(f, torch_light._Rearm) for f in sys.meta_path)
        again = torch_light.skip_dynamo_import()  # idempotent
        import torch._dynamo  # e.g. torch.compile
        cleared = [vars(fn).get("__dynamo_disable") is None for fn in fns]
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)  # add_param_group: real disable
        add = torch.optim.Optimizer.add_param_group.__wrapped__
        real = vars(add).get("__dynamo_disable")
        print(json.dumps({"n": n, "names": sorted(f.__name__ for f in fns), "hooked": hooked, "again": again,
                          "cleared": cleared, "left": len(torch_light.filled()),
                          "unhooked": not any(isinstance(f, torch_light._Rearm) for f in sys.meta_path),
                          "real": real is not None and real is not add and callable(real)}))
    """)
    assert out["n"] == len(out["names"]) > 0 and "add_param_group" in out["names"], out
    assert out["hooked"] and out["again"] == 0
    assert all(out["cleared"]) and out["left"] == 0 and out["unhooked"] and out["real"], out


def test_no_op_when_dynamo_is_already_imported() -> None:
    out = _run("""
        import json, sys, torch, torch._dynamo
        from vfl.runtime.fast import torch_light
        print(json.dumps({"n": torch_light.skip_dynamo_import(), "filled": len(torch_light.filled()),
                          "hooked": any(isinstance(f, torch_light._Rearm) for f in sys.meta_path)}))
    """)
    assert out == {"n": 0, "filled": 0, "hooked": False}


def test_an_unrecognized_torch_is_left_alone() -> None:
    out = _run("""
        import json, sys, torch
        from vfl.runtime.fast import torch_light
        torch._disable_dynamo = lambda fn=None, recursive=True: fn  # another torch: another decorator
        n = torch_light.skip_dynamo_import()
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)  # torch's own path: imports dynamo
        print(json.dumps({"n": n, "hooked": any(isinstance(f, torch_light._Rearm) for f in sys.meta_path),
                          "dynamo": "torch._dynamo" in sys.modules}))
    """)
    assert out == {"n": 0, "hooked": False, "dynamo": True}


def _fake_disable(cache: str) -> Any:
    """A decorator shaped like torch._compile._disable_dynamo, caching under ``cache``."""
    ns: dict[str, Any] = {}
    exec(textwrap.dedent(f"""
        import functools
        def _disable_dynamo(fn=None, recursive=True):
            @functools.wraps(fn)
            def inner(*args, **kwargs):
                disable_fn = getattr(fn, "{cache}", None)
                if disable_fn is None:
                    disable_fn = fn if recursive else fn
                    fn.{cache} = disable_fn
                return disable_fn(*args, **kwargs)
            return inner
    """), ns)
    return ns["_disable_dynamo"]


def test_feature_detection() -> None:
    same = _fake_disable("__dynamo_disable")
    code = torch_light._inner_code(same)
    assert code is not None

    def f() -> int:
        return 1

    wrapped = same(f)
    assert torch_light._undecorated(wrapped, code) is f
    assert torch_light._undecorated(f, code) is None  # not wrapped
    f.__dict__["__dynamo_disable"] = f
    assert torch_light._undecorated(wrapped, code) is None  # its cache is already filled: left as it is
    assert torch_light._inner_code(_fake_disable("_dynamo_cache")) is None  # another cache name
    assert torch_light._inner_code(None) is None and torch_light._inner_code(len) is None


BACKWARD = """
import hashlib, json, sys, torch
from vfl.runtime.fast.torch_light import SYMBOLIC, backward
torch.manual_seed(0)
bottoms = [torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4)) for _ in range(2)]
x, g = torch.randn(16, 7), torch.randn(16, 4)
outs = [b(x) for b in bottoms]
if MODE == "torch":
    outs[0].backward(g)
    torch.autograd.backward([outs[1]], [g * 2])
else:
    backward([outs[0]], [g])
    backward([outs[1]], [g * 2])
h = hashlib.sha256()
for b in bottoms:
    for p in b.parameters():
        h.update(p.grad.numpy().tobytes())
print(json.dumps({"grads": h.hexdigest(), "sympy": SYMBOLIC in sys.modules or "sympy" in sys.modules}))
"""


def test_backward_with_gradients_is_torchs_without_importing_sympy() -> None:
    """Parties' ``out.backward(g)``: the same gradients bit for bit; torch's own call (the control)
    imports torch.fx.experimental.symbolic_shapes and sympy, ours does not."""
    light = _run('MODE = "light"\n' + BACKWARD)
    control = _run('MODE = "torch"\n' + BACKWARD)
    assert light["grads"] == control["grads"]
    assert control["sympy"] is True and light["sympy"] is False


def test_backward_refuses_a_gradient_of_another_shape_as_torch_does() -> None:
    import pytest
    import torch

    out = torch.nn.Linear(3, 4)(torch.randn(5, 3))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        torch_light.backward([out], [torch.randn(5, 2)])  # the C++ engine alone would reduce a (1, 4) gradient
    out = torch.nn.Linear(3, 4)(torch.randn(5, 3))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        torch_light.backward([out], [torch.randn(1, 4)])
