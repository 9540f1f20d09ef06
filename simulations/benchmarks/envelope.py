"""Envelope bytes: every counted wire byte of a run against the information the protocol must carry.

    python -m simulations.benchmarks.envelope --out DIR [--config demo] [--epochs 3] [--set k=v ...]
                                              [--baseline OLD/envelope.json]

Runs the config (default: the demo, PBM + SecAgg, 4 parties, ``auth`` on) in-process (the bytes are
those of Ray: the same messages) and takes the ledger's counted bytes per message kind
(``summary.json`` ``bytes_by_kind_direction``, control included). Every message is also read as it is
serialized (``vfl.runtime.message.Wire.of``) to compute its share of the **information bound**: the bytes
the protocol must carry, each item at its wire precision —

- array data: an integer embedding at its bit width k (``ceil(rows * cols * k / 8)``, k from the
  message's ``enc`` record: PBM's b-bit / SecAgg's k-bit vectors), a float array at 4 bytes per
  element (float32; less for a narrower float), other integers at their item size;
- byte strings in config records at their size: SecAgg's self-mask releases (k-bit packed
  vectors), public keys (32 B), signatures (64 B), AES-GCM share envelopes (ciphertext, nonce and
  tag), revealed keys and shares, session ids;
- metric values (control replies) at 8 bytes each;
- with ``auth``: one authenticator per message at its size: a broadcast's 64-byte Ed25519
  signature, a unicast's 32-byte HMAC-SHA512/256 tag.

Nothing else is information: message ids, node ids, round tags, kinds, record and key names,
dtype/shape/stype strings, integers and flags the receiver knows from the protocol's state, and
protobuf framing are envelope. ``ratio`` = ``wire_bytes`` / ``info_bound_bytes`` (goal ≤ 1.25 at
the demo settings, issue #29.2); ``ratio_without_auth_tags`` leaves the authenticators out of the
bound (they count as envelope); ``ratio_learning`` divides the train phase's bytes by the strategy's
own ``information_bound_bytes`` (embeddings and gradients only: no SecAgg releases, no tags), and
``learning_floor`` is the lowest ``ratio_learning`` any envelope could reach: the train phase's
information bound over that (what the releases and tags alone add).

``DIR/envelope.json``: ``wire_bytes``, ``info_bound_bytes``, ``ratio``, ``ratio_without_auth_tags``,
``ratio_learning``, ``learning_floor``, ``info_bound_parts`` (arrays, config_bytes, metrics, auth_tags), ``messages``,
``envelope_bytes_per_message``, ``envelope_parts`` (metadata: the flwr ``Metadata`` field; auth_framing:
the authenticator record around its tag, sequence number included; records: the rest —
record, array and key names, dtype/shape strings, control integers, protobuf framing),
``train_bytes_per_round``, ``per_kind`` (kind -> direction ->
messages, wire_bytes, info_bound_bytes, envelope_bytes_per_message), ``captured_messages`` (must equal
``messages``: every counted message was read) and, with ``--baseline``, ``before`` (that file's
numbers) for a side-by-side table. ``DIR/envelope.md``: the table.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from flwr.common import ArrayRecord, ConfigRecord, Message, MetricRecord, serde

from parties.vertical import wire as vw
from simulations.cli.runner import execute, resolve_config
from vfl.runtime import message as vm
from vfl.runtime.auth import MAC_RECORD_BYTES, SIGNATURE_RECORD_BYTES
from vfl.runtime.ledger import CONTROL, DOWN, UP

SIG_TAG_BYTES, MAC_TAG_BYTES = 64, 32  # Ed25519 signature (broadcasts) / HMAC-SHA512/256 tag (unicasts)
FLOAT_WIRE_BYTES = 4  # float32


def _direction(src: int, dst: int) -> str:
    """The ledger's direction of a vertical-layout message (server = node 0)."""
    if src == dst:
        return CONTROL
    return DOWN if src == vw.SERVER_ID else UP


def _array_bits(arr: np.ndarray, *, enc: ConfigRecord | None) -> int:
    """Bytes of one array at its wire precision (see the module docstring)."""
    if enc is not None and arr.dtype.kind in "ui":  # an integer embedding: k bits per value
        rows, cols, k = (vm.config_int(enc, key) for key in (vw.Key.ROWS, vw.Key.COLS, vw.Key.BITS))
        return math.ceil(rows * cols * k / 8)
    if arr.dtype.kind == "f":
        return arr.size * min(arr.dtype.itemsize, FLOAT_WIRE_BYTES)
    return arr.nbytes


def information_bytes(message: Message) -> dict[str, int]:
    """The information bound of one message, by part (without its authenticator)."""
    parts = {"arrays": 0, "config_bytes": 0, "metrics": 0}
    if not message.has_content():
        return parts
    content = message.content
    enc = vm.record_of(message, vw.Record.ENC, ConfigRecord)
    for rec in content.values():
        if isinstance(rec, ArrayRecord):
            parts["arrays"] += sum(_array_bits(vm.from_array(a), enc=enc) for a in rec.values())
        elif isinstance(rec, ConfigRecord):
            for value in rec.values():
                items = value if isinstance(value, list) else [value]
                parts["config_bytes"] += sum(len(v) for v in items if isinstance(v, bytes))
        elif isinstance(rec, MetricRecord):
            parts["metrics"] += 8 * sum(len(v) if isinstance(v, list) else 1 for v in rec.values())
    return parts


class Capture:
    """Reads every message ``Wire.of`` serializes: its kind, direction and information bytes."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.train_rounds: set[str] = set()
        self.train_info = {"messages": 0, "broadcasts": 0, "bytes": 0}  # the train phase's messages and their information bytes
        self._of = vm.Wire.__dict__["of"]

    def __enter__(self) -> Capture:
        original = self._of.__func__

        def of(cls: type[vm.Wire], message: Message) -> vm.Wire:
            w = original(cls, message)
            row = self.rows[(w.kind, _direction(w.src, w.dst))]
            row["messages"] += 1
            row["broadcasts"] += w.dst == vm.BROADCAST
            row["metadata"] += len(serde.ProtoMessage(metadata=serde.ProtoMessage.FromString(w.data).metadata)
                                   .SerializeToString())  # the metadata field with its tag and length
            for part, n in information_bytes(message).items():
                row[part] += n
            if w.round.startswith("train:"):
                self.train_rounds.add(w.round)
                self.train_info["messages"] += 1
                self.train_info["broadcasts"] += w.dst == vm.BROADCAST
                self.train_info["bytes"] += sum(information_bytes(message).values())
            return w

        vm.Wire.of = classmethod(of)  # type: ignore[method-assign, assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        vm.Wire.of = self._of  # type: ignore[method-assign]


def measure(config: str, overrides: list[str], *, epochs: int) -> dict[str, Any]:
    """Run the config once and return the envelope.json numbers."""
    cfg = resolve_config(config, [*overrides, f"train.epochs={epochs}", "transport.kind=inprocess"])
    with Capture() as cap, tempfile.TemporaryDirectory(prefix="envelope-") as tmp:
        result = execute(cfg, out_dir=Path(tmp) / "run", progress=False)
    s = result.summary
    on = bool(s.get("auth"))

    def tags(n: int, broadcasts: int) -> int:
        """The authenticators of n messages, ``broadcasts`` of them signed."""
        return (SIG_TAG_BYTES * broadcasts + MAC_TAG_BYTES * (n - broadcasts)) if on else 0

    def framing(n: int, broadcasts: int) -> int:
        """The auth records around their tags (sequence number, record and key names, lengths)."""
        return (SIGNATURE_RECORD_BYTES * broadcasts + MAC_RECORD_BYTES * (n - broadcasts)) - tags(n, broadcasts) if on else 0

    per_kind: dict[str, dict[str, dict[str, Any]]] = {}
    totals = {"wire": 0, "messages": 0, "captured": 0, "arrays": 0, "config_bytes": 0, "metrics": 0, "auth_tags": 0,
              "metadata": 0, "auth_framing": 0, "records": 0}
    for kind, dirs in sorted(s["bytes_by_kind_direction"].items()):
        for direction, c in sorted(dirs.items()):
            got = cap.rows.get((kind, direction), {})
            n = int(c["messages"])
            info = {p: int(got.get(p, 0)) for p in ("arrays", "config_bytes", "metrics")}
            info["auth_tags"] = tags(n, int(got.get("broadcasts", 0)))
            bound = sum(info.values())
            parts = {"metadata": int(got.get("metadata", 0)), "auth_framing": framing(n, int(got.get("broadcasts", 0)))}
            parts["records"] = int(c["bytes"]) - bound - parts["metadata"] - parts["auth_framing"]
            per_kind.setdefault(kind, {})[direction] = {
                "messages": n, "captured_messages": int(got.get("messages", 0)), "wire_bytes": int(c["bytes"]),
                "info_bound_bytes": bound, "info_bound_parts": info,
                "ratio": round(c["bytes"] / bound, 4) if bound else None,
                "envelope_bytes_per_message": round((c["bytes"] - bound) / n, 1) if n else 0.0,
                "envelope_parts": parts}
            totals["wire"] += int(c["bytes"])
            totals["messages"] += n
            totals["captured"] += int(got.get("messages", 0))
            for p, v in [*info.items(), *parts.items()]:
                totals[p] += v
    bound = sum(totals[p] for p in ("arrays", "config_bytes", "metrics", "auth_tags"))
    train_bytes = sum(int(r["bytes_up"]) + int(r["bytes_down"]) for r in result.history)
    rounds = len(cap.train_rounds)
    train_bound = cap.train_info["bytes"] + tags(cap.train_info["messages"], cap.train_info["broadcasts"])
    learning = int(s.get("information_bound_bytes") or 0)
    return {
        "config": config, "overrides": overrides, "epochs": epochs, "auth": bool(s.get("auth")),
        "wire_bytes": totals["wire"], "info_bound_bytes": bound, "ratio": round(totals["wire"] / bound, 4),
        "ratio_without_auth_tags": round(totals["wire"] / (bound - totals["auth_tags"]), 4),
        "ratio_learning": round(train_bytes / learning, 4) if learning else None,
        "learning_floor": round(train_bound / learning, 4) if learning else None,
        "info_bound_parts": {p: totals[p] for p in ("arrays", "config_bytes", "metrics", "auth_tags")},
        "messages": totals["messages"], "captured_messages": totals["captured"],
        "envelope_bytes_per_message": round((totals["wire"] - bound) / totals["messages"], 1),
        "envelope_parts": {p: totals[p] for p in ("metadata", "auth_framing", "records")},
        "train_bytes": train_bytes, "train_info_bound_bytes": train_bound, "train_rounds": rounds,
        "train_bytes_per_round": round(train_bytes / rounds, 1) if rounds else None,
        "per_kind": per_kind,
    }


def table(result: dict[str, Any]) -> str:
    """Markdown table: totals, then per kind and direction (with the baseline's numbers when given)."""
    before = result.get("before")
    lines = []
    if before:
        lines += ["| | before | after |", "|---|---:|---:|"]
        for key in ("wire_bytes", "info_bound_bytes", "ratio", "ratio_without_auth_tags", "ratio_learning",
                    "learning_floor", "messages", "envelope_bytes_per_message", "envelope_parts",
                    "train_bytes_per_round"):
            lines.append(f"| `{key}` | {before.get(key)} | {result.get(key)} |")
        lines.append("")
    lines += ["| kind | direction | messages | wire bytes | info bound | ratio | envelope B/msg |"
              + (" envelope B/msg before |" if before else ""), "|---|---|---:|---:|---:|---:|---:|"
              + ("---:|" if before else "")]
    for kind, dirs in result["per_kind"].items():
        for direction, r in dirs.items():
            row = (f"| {kind} | {direction} | {r['messages']} | {r['wire_bytes']} | {r['info_bound_bytes']} | "
                   f"{r['ratio']} | {r['envelope_bytes_per_message']} |")
            if before:
                old = before.get("per_kind", {}).get(kind, {}).get(direction, {})
                row += f" {old.get('envelope_bytes_per_message', '')} |"
            lines.append(row)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--config", default="demo")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--baseline", default="", help="an earlier envelope.json, shown as 'before'")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = measure(args.config, args.overrides, epochs=args.epochs)
    if args.baseline:
        result["before"] = {k: v for k, v in json.loads(Path(args.baseline).read_text()).items() if k != "before"}
    (out / "envelope.json").write_text(json.dumps(result, indent=2) + "\n")
    text = table(result)
    (out / "envelope.md").write_text(text + "\n")
    print(text)
    print(f"wire {result['wire_bytes']} B / bound {result['info_bound_bytes']} B = {result['ratio']}x "
          f"({result['captured_messages']} of {result['messages']} messages read); {out / 'envelope.json'}")
    return result


if __name__ == "__main__":
    main()
