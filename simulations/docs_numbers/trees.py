"""Renderers of the trees' and Paillier's measured tables (docs/trees.md, docs/he.md), from their benchmarks'
JSON in ``docs/measurements/``: ``trees.json``, ``trees_exact.json``, ``trees_frontier.json``, ``paillier.json``."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]


def _f(v: Any, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def trees_table(data: Json) -> str:
    lines = ["| shape | rows × columns | depth, bins | he | transport | s/tree | xgboost s/tree | test AUC | xgboost AUC "
             "| MB/tree: all (payload; formula) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        he = f"{r['he']}, hidden" if r.get("hide_instance_space") else r["he"]
        formula = r["formula_bytes_per_tree"]
        lines.append(f"| {r['shape']} | {r['n_train']} × {r['features']} | {r['depth']}, {r['max_bin']} | {he} | "
                     f"{r['transport']} | {_f(r['s_per_tree'], '.3g')} | {_f(r.get('xgboost_s_per_tree'), '.3g')} | "
                     f"{_f(r['test_auc'], '.4f')} | {_f(r.get('xgboost_test_auc'), '.4f')} | "
                     f"{r['bytes_per_tree'] / 1e6:.2f} ({r['payload_bytes_per_tree'] / 1e6:.2f}; "
                     f"{_f(formula and formula / 1e6, '.2f')}) |")
    machine = data.get("machine", {})
    lines.append(f"\n{machine.get('cpus', '?')} cores; {data.get('note', '')}".rstrip())
    return "\n".join(lines)


def trees_exact_table(data: Json) -> str:
    lines = ["| set | objective | he | metric | federated | xgboost (same cuts) | gap | nodes agreeing |",
             "|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        gap = f"{r['gap']:.2%}" if r["metric"] == "test_rmse" else f"{r['gap']:.4f}"
        lines.append(f"| {r['set']} ({r['n_train']} rows) | {r['objective']} | {r['he']} | {r['metric']} | "
                     f"{r['ours']:.4f} | {r['xgboost']:.4f} | {gap} | {r['node_agreement']:.1%} of {r['nodes']} |")
    return "\n".join(lines)


def _pm(r: Json, key: str, spec: str) -> str:
    sd = r.get(f"{key}_std")
    return _f(r.get(key), spec) + ("" if sd is None else f" ± {sd:.3f}")


def trees_frontier_table(data: Json) -> str:
    lines = ["| set | setting | ε_label | test AUC | instance-space attack | chance | advantage | trees |",
             "|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        eps = "∞" if r["epsilon_label"] is None else f"{r['epsilon_label']:.3g}"
        runs = f" (mean of {r['repeats']})" if r.get("repeats", 1) > 1 else ""
        lines.append(f"| {r['set']} | {r['setting']}{runs} | {eps} | {_pm(r, 'test_auc', '.4f')} | "
                     f"{_pm(r, 'attack', '.4f')} | {_f(r['chance'], '.4f')} | {_f(r['advantage'], '+.4f')} | "
                     f"{r['trees']} {r['he']} |")
    return "\n".join(lines)


def paillier_table(data: Json) -> str:
    rows = [("key holder encryption (CRT, randomizers inline)", f"{data['encrypt_per_s_per_core']:,.0f} /s/core"),
            ("public-key encryption (table mod n²)", f"{data['public_encrypt_per_s_per_core']:,.0f} /s/core"),
            ("randomizers h_s^α (CRT)", f"{data['randomizer_per_s_per_core']:,.0f} /s/core"),
            ("encryption with a prefilled pool (the critical path)", f"{data['encrypt_with_pool_per_s']:,.0f} /s"),
            ("addition (a product mod n²)", f"{data['add_per_s_per_core']:,.0f} /s/core"),
            ("decryption (CRT)", f"{data['decrypt_per_s_per_core']:,.0f} /s/core"),
            (f"`pack_ciphertexts` ({data['pack_slots']} slots of {data['pack_shift_bits']} bits)",
             f"{data['pack_per_s']:,.0f} slots/s/core"),
            (f"`grouped_sum` ({data['grouped_sum_groups']} bins)", f"{data['grouped_sum_rows_per_s']:,.0f} rows/s/core"),
            ("`to_wire` / `from_wire`", f"{data['to_wire_us']:.2f} / {data['from_wire_us']:.2f} µs per ciphertext")]
    bg = data.get("background") or {}
    kinds = [k for k in ("process", "thread_table", "thread_powmod") if k in bg]
    if kinds:
        rows.append(("pool worker (process) / table thread / `powmod` thread, alone",
                     " / ".join(f"{bg[k]['randomizers_per_s']:,.0f}" for k in kinds) + " randomizers/s"))
        rows.append(("the same beside the main thread's `grouped_sum`",
                     " / ".join(f"{bg[k]['randomizers_per_s_while_main_busy']:,.0f}" for k in kinds) + " randomizers/s"))
    m = data.get("machine", {})
    lines = [f"| operation ({data.get('key_bits', 2048)}-bit n) | rate |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    lines.append(f"\n{m.get('cpus', '?')} cores, load {m.get('load_1min', '?')} at the start; gmpy2 {m.get('gmpy2', '?')}, "
                 f"GMP {m.get('gmp', '?')}.")
    return "\n".join(lines)


RENDERERS = {("trees", "table"): trees_table, ("trees_exact", "table"): trees_exact_table,
             ("trees_frontier", "table"): trees_frontier_table, ("paillier", "table"): paillier_table}
