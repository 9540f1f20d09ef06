"""Renderers of the trees' and Paillier's measured tables (docs/trees.md, docs/he.md), from their benchmarks'
JSON in ``docs/measurements/``: ``trees.json``, ``trees_exact.json``, ``trees_frontier.json``, ``paillier.json``."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]


def _f(v: Any, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def trees_table(data: Json) -> str:
    lines = ["| shape | rows × columns | depth, bins | he | transport | s/tree | xgboost s/tree | test AUC | xgboost AUC "
             "| MB/tree (formula) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['shape']} | {r['n_train']} × {r['features']} | {r['depth']}, {r['max_bin']} | {r['he']} | "
                     f"{r['transport']} | {_f(r['s_per_tree'], '.3g')} | {_f(r.get('xgboost_s_per_tree'), '.3g')} | "
                     f"{_f(r['test_auc'], '.4f')} | {_f(r.get('xgboost_test_auc'), '.4f')} | "
                     f"{r['bytes_per_tree'] / 1e6:.2f} ({r['formula_bytes_per_tree'] / 1e6:.2f}) |")
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


def trees_frontier_table(data: Json) -> str:
    lines = ["| set | setting | ε_label | test AUC | instance-space attack | chance | advantage |",
             "|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        eps = "∞" if r["epsilon_label"] is None else f"{r['epsilon_label']:.3g}"
        lines.append(f"| {r['set']} | {r['setting']} | {eps} | {_f(r['test_auc'], '.4f')} | {_f(r['attack'], '.4f')} | "
                     f"{_f(r['chance'], '.4f')} | {_f(r['advantage'], '+.4f')} |")
    return "\n".join(lines)


def paillier_table(data: Json) -> str:
    rows = [("key holder encryption (CRT, randomizers inline)", "encrypt_per_s_per_core", "/s/core"),
            ("public-key encryption", "public_encrypt_per_s_per_core", "/s/core"),
            ("encryption with a filled randomizer pool (critical path)", "encrypt_with_pool_per_s", "/s"),
            ("homomorphic addition", "add_per_s_per_core", "/s/core"),
            ("CRT decryption", "decrypt_per_s_per_core", "/s/core")]
    lines = [f"| operation ({data.get('key_bits', 2048)}-bit n) | rate |", "|---|---|"]
    lines += [f"| {label} | {data[key]:,.0f} {unit} |" for label, key, unit in rows if key in data]
    return "\n".join(lines)


RENDERERS = {("trees", "table"): trees_table, ("trees_exact", "table"): trees_exact_table,
             ("trees_frontier", "table"): trees_frontier_table, ("paillier", "table"): paillier_table}
