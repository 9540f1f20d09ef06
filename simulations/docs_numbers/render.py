"""Renderers of the generated numbers: (file, kind) -> f(the JSON, *args) -> text. One per table or value
the docs show; the peers table is the benchmark's own (``simulations.benchmarks.peers.table``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulations.docs_numbers.trees import RENDERERS as TREES

Json = dict[str, Any]


def _fmt(v: Any, spec: str, none: str = "–") -> str:
    return none if v is None else format(v, spec)


# ---- peers: the same vertical task through Flower and this project (docs/performance.md, README) ----------
def _peer(data: Json, system: str, transport: str, m: str) -> Json:
    rows = [r for r in data["rows"] if (r["system"], r["transport"], str(r["parties"])) == (system, transport, m)]
    if len(rows) != 1:
        raise KeyError(f"peers: no single row {system}/{transport}/M={m}")
    return rows[0]


def _flower(data: Json, m: str) -> Json:
    return _peer(data, "flower", "flwr-simulation-ray", m)


def peers_table(data: Json) -> str:
    from simulations.benchmarks.peers import table

    return table(data["rows"])


def peers_value(field: str, spec: str) -> Callable[..., str]:
    def value(data: Json, system: str, transport: str, m: str) -> str:
        return format(_peer(data, system, transport, m)[field], spec)

    return value


def peers_speedup(data: Json, transport: str, m: str) -> str:
    """Flower's step time over ours, rounded to a whole factor: ``21×``."""
    return f"{_flower(data, m)['step_ms'] / _peer(data, 'vfl', transport, m)['step_ms']:.0f}×"


def peers_runs(data: Json, transport: str, m: str) -> str:
    """The single repeats' step times: ``11.6 and 7.6``."""
    return " and ".join(f"{v:.1f}" for v in _peer(data, "vfl", transport, m)["runs_step_ms"])


def peers_range(field: str, spec: str) -> Callable[..., str]:
    def span(data: Json, transport: str) -> str:
        vals = sorted(r[field] for r in data["rows"] if r["system"] == "vfl" and r["transport"] == transport)
        return f"{vals[0]:{spec}}–{vals[-1]:{spec}}"

    return span


def peers_bytes_ratio(data: Json) -> str:
    """Flower's bytes per step over ours, the range over M: ``1.7–2.0``."""
    ms = sorted({str(r["parties"]) for r in data["rows"]})
    ratios = sorted(_flower(data, m)["bytes_per_step"] / _peer(data, "vfl", "ray", m)["bytes_per_step"] for m in ms)
    return f"{ratios[0]:.1f}–{ratios[-1]:.1f}"


# ---- comm_cost: to a target, and FedBCD's local steps (docs/benchmarks.md, docs/performance.md) -------------
def comm_cost_table(data: Json) -> str:
    target = data["meta"]["target"]
    lines = [f"| setting | epochs to {target} | measured MB | formula MB | final test acc | ε (δ=1e-5) |",
             "|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['label']} | {_fmt(r['epochs_to_target'], 'd', 'never')} | {_fmt(r['measured_mb'], '.3f')} "
                     f"| {_fmt(r['formula_mb'], '.3f')} | {r['final_test_acc']:.3f} | {_fmt(r['epsilon'], '.0f')} |")
    return "\n".join(lines)


def local_steps_table(data: Json) -> str:
    """docs/performance.md's: epochs, exchanges and MB to the target, final accuracy and ε per Q."""
    t, e = data["meta"]["target"], data["meta"]["epochs"]
    lines = [f"| Q | epochs to {t} | exchanges to {t} | measured MB to {t} | final test acc ({e} epochs) | ε (δ = 1e-5) |",
             "|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['local_steps']} | {_fmt(r['epochs_to_target'], 'd', 'never')} | "
                     f"{_fmt(r['exchanges_to_target'], 'd', 'never')} | {_fmt(r['measured_mb'], '.3f', 'never')} | "
                     f"{r['final_test_acc']:.3f} | {r['epsilon']:.1f} |")
    return "\n".join(lines)


def local_steps_short(data: Json) -> str:
    """docs/benchmarks.md's: exchanges and MB to the target and ε per Q."""
    t, e = data["meta"]["target"], data["meta"]["epochs"]
    lines = [f"| Q | exchanges to {t} | MB to {t} | ε after {e} epochs |", "|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['local_steps']} | {_fmt(r['exchanges_to_target'], 'd', 'never')} | "
                     f"{_fmt(r['measured_mb'], '.3f', 'never')} | {r['epsilon']:.1f} |")
    return "\n".join(lines)


# ---- p3eft_table (docs/benchmarks.md) ------------------------------------------------------------------
def p3eft_table(data: Json) -> str:
    lines = ["| strategy | test acc % | leak % | KB/step |", "|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['strategy']} | {100 * r['test_acc']:.1f} | {100 * r['leak']:.1f} | "
                     f"{r['bytes_per_step'] / 1000:.0f} |")
    return "\n".join(lines)


def p3eft_ray_ratio(data: Json) -> str:
    return f"{data['timing']['ray_ratio']:.2f}"


# ---- scaling (docs/performance.md) --------------------------------------------------------------------
def scaling_table(data: Json) -> str:
    lines = ["| parties | host actors | step ms | driver + actors RSS GiB | USS GiB | whole session RSS GiB |",
             "|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['parties']} | {r['actors']} | {r['step_ms']:.1f} | {r['rss_gib']:.2f} | {r['uss_gib']:.2f} | "
                     f"{r['session_rss_gib']:.2f} |")
    return "\n".join(lines)


def scaling_growth(data: Json, steps: str) -> str:
    return f"{data['rss_growth_gib'][steps]:.3f}"


# ---- split_cost: a split step against the same model in one process (docs/llm-p3eft.md) ---------------
_SPLIT_STRATEGIES = ("split-lora", "ushape-lora", "p3eft", "ushape-p3eft")
_SPLIT_GOAL = ("split-lora", "ushape-lora")  # held to ≤ 1.2×; the others are beside them
_SPLIT_MODELS = {"minilm": "packaged MiniLM", "llama512": "Llama d = 512, 4 blocks",
                 "tiny-llama": "tiny Llama of `vfl tiny-lm` (d = 32)"}


def _split_row(r: Json, label: str, *, goal: bool) -> str:
    """One row; a ratio held to the goal and within it is bold."""
    ratio = f"{r['ratio']:.2f}×"
    if goal and r["ratio"] <= 1.2:
        ratio = f"**{ratio}**"
    return (f"| {label} | {_SPLIT_MODELS.get(r['model'], r['model'])} | {1000 * r['split_s_per_step']:.0f} | "
            f"{1000 * r['single_s_per_step']:.0f} | {ratio} | {', '.join(f'{x:.2f}' for x in r['ratios'])} |")


def split_cost_table(data: Json) -> str:
    models = list(_SPLIT_MODELS)
    rows = sorted(data["rows"], key=lambda r: (_SPLIT_STRATEGIES.index(r["strategy"]), models.index(r["model"])))
    lines = ["| strategy | model | split ms/step | single ms/step | ratio | the rounds |",
             "|---|---|---:|---:|---:|---|"]
    for r in rows:
        goal = r["strategy"] in _SPLIT_GOAL
        lines.append(_split_row(r, f"`{r['strategy']}`" + ("" if goal else " (beside)"), goal=goal))
    for r in data.get("control", {}).get("rows", []):
        fresh = r["strategy"].endswith("+fresh")
        base = r["strategy"].removesuffix("+fresh")
        label = (f"control, own run: `{base}` without the kept graph" if fresh else f"the same run: `{base}`")
        lines.append(_split_row(r, label, goal=False))
    return "\n".join(lines)


RENDERERS: dict[tuple[str, str], Callable[..., str]] = {
    ("peers", "table"): peers_table,
    ("peers", "step_ms"): peers_value("step_ms", ".1f"),
    ("peers", "speedup"): peers_speedup,
    ("peers", "runs"): peers_runs,
    ("peers", "startup_range"): peers_range("startup_s", ".1f"),
    ("peers", "bytes_ratio"): peers_bytes_ratio,
    ("peers", "measured"): lambda data: data["measured"],
    ("comm_cost", "table"): comm_cost_table,
    ("local_steps", "table"): local_steps_table,
    ("local_steps", "short"): local_steps_short,
    ("p3eft_table", "table"): p3eft_table,
    ("p3eft_table", "ray_ratio"): p3eft_ray_ratio,
    ("scaling", "table"): scaling_table,
    ("scaling", "growth"): scaling_growth,
    ("split_cost", "table"): split_cost_table,
    **TREES,
}
